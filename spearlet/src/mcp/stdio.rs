//! A stdio MCP server as a child process of the node.
//!
//! The child runs in its own process group with a clean environment (its
//! declared `env` plus `PATH`, `HOME` and `LANG`, never the spearlet's own
//! variables, which hold LLM keys). Its stderr goes to the node's log line by
//! line, bounded in length and rate, with resolved secrets redacted. Shutdown
//! closes stdin, then SIGTERMs the whole group, then SIGKILLs it, so no
//! grandchild outlives its server.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use spear_common::text;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::server_log::{FloodGuard, MAX_LINE};
use crate::env_refs::Redactor;

/// What to run.
#[derive(Debug, Clone)]
pub struct StdioCommand {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// A running stdio server process (the leader of its own process group).
pub struct StdioChild {
    child: Child,
    pgid: Option<i32>,
    stderr: Option<JoinHandle<()>>,
}

/// The base environment every child gets.
fn base_env() -> Vec<(String, String)> {
    let mut env = Vec::new();
    for name in ["PATH", "HOME", "LANG"] {
        if let Ok(value) = std::env::var(name) {
            env.push((name.to_string(), value));
        }
    }
    if !env.iter().any(|(n, _)| n == "LANG") {
        env.push(("LANG".into(), "C.UTF-8".into()));
    }
    env
}

impl StdioChild {
    /// Starts the server; returns its stdout and stdin for the MCP transport.
    pub fn spawn(
        server_id: &str,
        command: &StdioCommand,
        redactor: Arc<Redactor>,
    ) -> std::io::Result<(StdioChild, ChildStdout, ChildStdin)> {
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args)
            .env_clear()
            .envs(base_env())
            .envs(command.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &command.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn()?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(std::io::Error::other("child has no stdio pipes"));
        };
        let pgid = child.id().map(|pid| pid as i32);
        let stderr = child.stderr.take().map(|stderr| {
            let server_id = server_id.to_string();
            tokio::spawn(pump_stderr(server_id, stderr, redactor))
        });
        Ok((
            StdioChild {
                child,
                pgid,
                stderr,
            },
            stdout,
            stdin,
        ))
    }

    /// The child's process id (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.pgid.map(|p| p as u32)
    }

    /// Waits `grace` for the server to exit after its stdin closed, then
    /// SIGTERMs its group, then SIGKILLs it. Always ends with the group gone.
    pub async fn shutdown(&mut self, grace: Duration) {
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.signal_group(libc::SIGTERM);
            if tokio::time::timeout(grace, self.child.wait())
                .await
                .is_err()
            {
                self.signal_group(libc::SIGKILL);
                let _ = self.child.wait().await;
            }
        }
        // Grandchildren may outlive the leader: end the group in any case.
        self.signal_group(libc::SIGTERM);
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.signal_group(libc::SIGKILL);
        if let Some(task) = self.stderr.take() {
            task.abort();
        }
        self.pgid = None;
    }

    /// SIGKILLs the whole process group.
    pub fn kill(&self) {
        self.signal_group(libc::SIGKILL);
    }

    fn signal_group(&self, signal: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals that process group;
            // the group id is our own child's pid, so no unrelated process.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

impl Drop for StdioChild {
    fn drop(&mut self) {
        self.signal_group(libc::SIGKILL);
    }
}

async fn pump_stderr(
    server_id: String,
    stderr: tokio::process::ChildStderr,
    redactor: Arc<Redactor>,
) {
    let mut lines = BufReader::new(stderr).lines();
    let mut guard = FloodGuard::new(&server_id, "stderr");
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                warn!(server_id, %error, "cannot read the server's stderr");
                break;
            }
        };
        if !guard.admit() {
            continue;
        }
        // Redact before cutting, so a cut never leaves part of a secret.
        let line = redactor.redact(&line);
        info!(server_id, "stderr: {}", text::prefix(&line, MAX_LINE));
    }
}
