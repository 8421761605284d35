//! [`StdioCommand`]: what to run for a stdio server, as resolved on this
//! node. Its own file, low in the layers: the sandbox decides on it, the
//! MCP client runs it.

use std::path::PathBuf;

/// What to run.
#[derive(Clone)]
pub struct StdioCommand {
    pub program: String,
    pub args: Vec<String>,
    /// Resolved values, secrets among them.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// Names only: env values are resolved secrets and never printed.
impl std::fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &self.args.len())
            .field("env", &self.env.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

#[cfg(test)]
impl StdioCommand {
    /// `program` with `args`, no environment and no working directory:
    /// what the tests of the rules about commands start from.
    pub(crate) fn of(program: &str, args: &[&str]) -> Self {
        StdioCommand {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            cwd: None,
        }
    }
}
