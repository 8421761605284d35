//! `spear-sandbox`: the launcher alone, installed next to `spearlet`.
//!
//! The node starts each stdio MCP server through a launcher
//! ([`spear_sandbox::launcher`]). Its own binary can be that launcher
//! (`spearlet sandbox-exec`), but executing a binary the size of the node
//! costs about 1.4 ms of relocations on every server start; this one is
//! small. The node prefers it when it sits beside the node's binary
//! ([`spear_sandbox::launcher_beside`]).

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match spear_sandbox::launcher::run_if_asked(&args) {
        Some(code) => std::process::exit(code),
        None => {
            eprintln!(
                "spear-sandbox: this is the launcher a spearlet node runs its MCP servers \
                 through (`spear-sandbox {}`, with the node's plan on descriptor 3); \
                 it is not run by hand",
                spear_sandbox::LAUNCHER_ARG
            );
            std::process::exit(2);
        }
    }
}
