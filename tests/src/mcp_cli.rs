//! The real `spearlet mcp` command, run as the tests of the node's MCP client run it.

/// What one `spearlet mcp` run ended with.
pub struct Output {
    /// The exit code; -1 when a signal ended it.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `spearlet mcp <args>` with `env` added to a clean environment.
/// `RUST_LOG=info`: the tests read the node's own lines (the sandbox it
/// chose, a server's stderr).
pub fn spearlet_mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    let (code, stdout, stderr) = crate::peers::spearlet_mcp(args, env, "info");
    Output {
        code,
        stdout,
        stderr,
    }
}
