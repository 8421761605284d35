//! Spear's sandbox for the stdio MCP servers a node starts
//! (docs/decisions/0007-sandbox.md).
//!
//! Two halves with different rights:
//! - the node builds a [`Plan`] (what the server may read, write, reach
//!   and use) and starts the **launcher** (the small `spear-sandbox`
//!   binary beside the node's, or the node's own run as
//!   `spearlet sandbox-exec`) through [`launch::ReportSocket`], which
//!   hands it a socket with the plan and reads back one [`Report`] (what
//!   is in force, or why the server could not be confined) and the
//!   listening sockets of the server's declared destinations;
//! - the launcher ([`launcher::run_if_asked`], entered from `main` before
//!   any thread exists) puts itself in new user, mount, PID, network, IPC,
//!   UTS and cgroup namespaces, and runs the server as the second process of the new
//!   PID namespace behind a small init that reaps its orphans. Before the
//!   server's program is executed: a private `/proc`, `/tmp` (its scratch
//!   `HOME`) and `/run`, the node's own paths masked, loopback up with a
//!   listener per declared destination, resource limits, Landlock,
//!   `no_new_privs` and a seccomp filter.
//!
//! Nothing here decides what a server is granted: that is the node's
//! policy and the server file (spearlet's `sandbox` module). This crate
//! only makes a plan true, or says exactly which part could not be.

mod cgroup;
pub mod launch;
pub mod launcher;
mod limits;
mod mounts;
mod net;
mod plan;
pub mod refusal;
mod report;
mod rules;
mod seccomp;
pub mod syscalls;

pub use plan::{Forward, Plan, Required, HOME, SCRATCH};
pub use report::{Feature, Report};

/// The first argument that makes the spearlet binary the launcher.
pub const LAUNCHER_ARG: &str = "sandbox-exec";

/// The small launcher's file name, installed beside `spearlet`.
pub const LAUNCHER_BINARY: &str = "spear-sandbox";

/// The launcher for a node whose binary is `node_exe`: the small
/// `spear-sandbox` beside it when there is one, otherwise the node's own
/// binary (which is a launcher too, only slower to start).
pub fn launcher_beside(node_exe: &std::path::Path) -> std::path::PathBuf {
    let small = node_exe.with_file_name(LAUNCHER_BINARY);
    if small.is_file() {
        small
    } else {
        node_exe.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_launcher_beside_the_node_is_preferred_and_its_absence_is_not_fatal() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let node = dir.path().join("spearlet");
        std::fs::write(&node, b"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(launcher_beside(&node), node);
        let small = dir.path().join(LAUNCHER_BINARY);
        std::fs::write(&small, b"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(launcher_beside(&node), small);
    }
}
