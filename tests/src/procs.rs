//! The real `sms` and `spearlet` binaries as child processes.
//!
//! Each process writes its log to a file in its own temp dir (printed when a
//! test fails), is stopped with SIGTERM by [`Proc::stop`] and killed on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod sms;
mod spearlet;

pub use sms::{SmsOptions, SmsProc};
pub use spearlet::SpearletProc;

/// The path of a workspace binary, next to the test executable's `deps/`.
/// For a benchmark: when one of `names` is not built next to it, says in
/// one line what to run and exits (no panic, no backtrace).
pub fn require_bins(names: &[&str]) {
    let exe = std::env::current_exe().unwrap_or_default();
    let release = exe.components().any(|c| c.as_os_str() == "release");
    for name in names {
        let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        if dir.ends_with("deps") {
            dir.pop();
        }
        if !dir.join(name).exists() {
            let profile = if release { " --release" } else { "" };
            eprintln!(
                "{name} is not built for this benchmark: run `cargo build{profile} --workspace --bins` first"
            );
            std::process::exit(2);
        }
    }
}

/// Runs `command` to its end and returns what it printed; kills it and
/// panics when it is still running after `within` (a command that should
/// refuse at once and instead waits). Waits on the process's end, not on
/// a clock: a thread collects it and reports on a channel.
pub fn output_within(mut command: Command, within: Duration) -> std::process::Output {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let pid = child.id().to_string();
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match ended.recv_timeout(within) {
        Ok(output) => output.unwrap_or_else(|e| panic!("{command:?}: {e}")),
        Err(_) => {
            // The child is not reaped until the thread's wait returns,
            // so the pid is still its own.
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            let err = ended
                .recv()
                .ok()
                .and_then(Result::ok)
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
            panic!("{command:?} still ran after {within:?}; stderr: {err:?}");
        }
    }
}

pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// A running child process with its log file.
pub struct Proc {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    /// Spawns `command`, sending stdout and stderr to `log`.
    pub fn spawn(name: &str, mut command: Command, log: PathBuf) -> Proc {
        let out = File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let err = out.try_clone().unwrap_or_else(|e| panic!("log file: {e}"));
        command.stdin(Stdio::null()).stdout(out).stderr(err);
        command.env(
            "RUST_LOG",
            std::env::var("SPEAR_TEST_LOG").unwrap_or_else(|_| "info".into()),
        );
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc {
            name: name.to_string(),
            child: Some(child),
            log,
        }
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGTERM, then wait up to 10 s, then SIGKILL.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        for _ in 0..500 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGKILL now: a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP / SIGCONT: a process that stops reading without closing.
    pub fn pause(&self, paused: bool) {
        self.signal(if paused { "STOP" } else { "CONT" });
    }

    /// Sends the signal named `name` (TERM, HUP, ...).
    pub fn signal(&self, name: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg(format!("-{name}"))
                .arg(pid.to_string())
                .status();
        }
    }

    /// How the process ended, once it has.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.kill();
            if std::thread::panicking() {
                eprintln!("----- log of {} -----\n{}", self.name, self.log());
            }
        }
    }
}

/// Resident memory of a process, in KiB (0 once it has gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
