//! A stdio MCP server as a child process of the node.
//!
//! The child runs in its own process group with a clean environment (its
//! declared `env` plus `PATH`, `HOME` and `LANG`, never the spearlet's own
//! variables, which hold LLM keys). Its stderr goes to the node's log line by
//! line, bounded in length and rate, with resolved secrets redacted. Shutdown
//! closes stdin, then SIGTERMs the whole group, then SIGKILLs it, so no
//! grandchild outlives its server.
//!
//! Confined (the default on a node, see `crate::sandbox`), the child is
//! the sandbox launcher with the server's plan; the node reads its report
//! (what is in force) before the MCP handshake, and forwards the server's
//! declared destinations.

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

pub use crate::sandbox::StdioCommand;

/// A running stdio server process (the leader of its own process group).
pub struct StdioChild {
    child: Child,
    pgid: Option<i32>,
    stderr: Option<JoinHandle<()>>,
    /// The sandbox's forwarders (confined servers).
    _forwarders: Option<crate::sandbox::Forwarders>,
    /// What confines it: a word and the line saying what holds.
    sandbox: Sandboxed,
}

/// What confines a stdio server, as status views show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandboxed {
    /// `confined`, `partly confined`, `off` (its file and the node's
    /// policy), `unconfined` (a library caller chose no sandbox).
    pub label: &'static str,
    /// What holds, in one line.
    pub detail: String,
}

/// How a confined server is started: the launcher and its plan.
pub struct Confined<'a> {
    pub launcher: &'a std::path::Path,
    pub plan: &'a spear_sandbox::Plan,
    pub egress: Option<&'a crate::node_policy::Egress>,
    /// How long the launcher may take to report.
    pub within: Duration,
}

/// The environment a server gets: the base every child gets, then its
/// declared `env`. A confined server's `HOME` and `TMPDIR` are its
/// private scratch directory.
fn environment(command: &StdioCommand, confined: bool) -> Vec<(String, String)> {
    let mut env = base_env(confined);
    env.extend(command.env.iter().cloned());
    env
}

fn base_env(confined: bool) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if confined {
        env.push(("HOME".into(), spear_sandbox::HOME.into()));
        env.push(("TMPDIR".into(), spear_sandbox::SCRATCH.into()));
    }
    let own: &[&str] = if confined {
        &["PATH", "LANG"]
    } else {
        &["PATH", "HOME", "LANG"]
    };
    for name in own.iter().copied() {
        if let Ok(value) = std::env::var(name) {
            env.push((name.to_string(), value));
        }
    }
    if !env.iter().any(|(n, _)| n == "LANG") {
        env.push(("LANG".into(), "C.UTF-8".into()));
    }
    env
}

type Spawned = (StdioChild, ChildStdout, ChildStdin);

impl StdioChild {
    /// Starts the server unconfined; returns its stdout and stdin for the
    /// MCP transport.
    pub fn spawn(
        server_id: &str,
        command: &StdioCommand,
        redactor: Arc<Redactor>,
    ) -> std::io::Result<Spawned> {
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args);
        let env = environment(command, false);
        let mut spawned = Self::start(server_id, cmd, env, command, redactor)?;
        spawned.0.sandbox = Sandboxed {
            label: "unconfined",
            detail: "unconfined: started without a sandbox".into(),
        };
        Ok(spawned)
    }

    /// Starts the server in its sandbox: the launcher with `confined`'s
    /// plan. Waits for the launcher's report; a server that could not be
    /// confined is ended and its reason returned.
    pub async fn spawn_confined(
        server_id: &str,
        command: &StdioCommand,
        redactor: Arc<Redactor>,
        confined: Confined<'_>,
    ) -> Result<Spawned, super::McpError> {
        use spear_sandbox::launch::ReportSocket;
        use std::os::fd::AsRawFd;
        let failed = |e: &dyn std::fmt::Display| super::McpError::Sandbox(e.to_string());
        let (ours, theirs) = ReportSocket::pair().map_err(|e| failed(&e))?;
        // The server's environment goes with the plan: the launcher's own
        // is empty, so only the server's process holds its secrets.
        let orders = spear_sandbox::launch::Orders {
            plan: confined.plan.clone(),
            env: environment(command, true),
        };
        ours.send_orders(&orders).map_err(|e| failed(&e))?;
        drop(orders);
        let mut cmd = Command::new(confined.launcher);
        cmd.arg(spear_sandbox::LAUNCHER_ARG);
        let raw = theirs.as_raw_fd();
        // SAFETY: the hook only calls dup2/fcntl (async-signal-safe).
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || ReportSocket::install_in_child(raw));
        }
        let (mut child, stdout, stdin) = Self::start(server_id, cmd, Vec::new(), command, redactor)
            .map_err(|cause| super::McpError::Spawn {
                program: confined.launcher.display().to_string(),
                cause,
            })?;
        drop(theirs);
        let within = confined.within;
        let received = tokio::task::spawn_blocking(move || ours.read(within))
            .await
            .map_err(|e| failed(&e))?;
        let received = match received {
            Ok(received) if received.report.refused.is_none() => received,
            Ok(received) => {
                child.kill();
                return Err(super::McpError::Sandbox(received.report.summary()));
            }
            Err(error) => {
                child.kill();
                return Err(failed(&error));
            }
        };
        child.sandbox = Sandboxed {
            label: received.report.label(),
            detail: received.report.summary(),
        };
        info!(server_id, "sandbox: {}", child.sandbox.detail);
        let forwarders = crate::sandbox::Forwarders::start(
            server_id,
            &confined.plan.forwards,
            received.listeners,
            confined.egress,
        )
        .await;
        match forwarders {
            Ok(f) => child._forwarders = Some(f),
            Err(why) => {
                child.kill();
                return Err(super::McpError::Sandbox(why.to_string()));
            }
        }
        Ok((child, stdout, stdin))
    }

    /// Marks a server the node's policy let run unconfined.
    pub fn mark_off(&mut self) {
        self.sandbox = Sandboxed {
            label: "off",
            detail: "off: unconfined, as its file asks and the node's policy allows".into(),
        };
    }

    /// What confines the server, in one line.
    pub fn sandbox(&self) -> &Sandboxed {
        &self.sandbox
    }

    fn start(
        server_id: &str,
        mut cmd: Command,
        env: Vec<(String, String)>,
        command: &StdioCommand,
        redactor: Arc<Redactor>,
    ) -> std::io::Result<Spawned> {
        cmd.env_clear()
            .envs(env)
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
                _forwarders: None,
                sandbox: Sandboxed::default(),
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
