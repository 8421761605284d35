//! The real `sms` and `spearlet` binaries as child processes.
//!
//! Each process writes its log to a file in its own temp dir (printed when a
//! test fails), is stopped with SIGTERM by [`Proc::stop`] and killed on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::wait::{eventually, free_port};

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

/// How to start an SMS.
#[derive(Clone, Default)]
pub struct SmsOptions {
    pub mcp_dir: Option<PathBuf>,
    pub etcd: Option<String>,
    /// Written to a file SMS reads with `--admin-token-file`.
    pub admin_token: Option<String>,
    /// SMS's own certificate: its port is mutual TLS.
    pub tls: Option<crate::certs::TlsSet>,
    /// What [`SmsProc::client`] dials with (an admin's certificate).
    pub client_tls: Option<crate::certs::TlsSet>,
    /// More `sms serve` arguments.
    pub extra: Vec<String>,
    /// Run in this network namespace, listening on its address.
    pub place: Option<crate::netns::Place>,
    pub progress_interval_ms: Option<u64>,
    pub history_len: Option<usize>,
    /// Reuse this gRPC port (a restart keeps the address nodes know).
    pub port: Option<u16>,
    /// [`SmsProc::client`] presents `admin_token` (the console tests sign
    /// in with it, and drive the CLI as before).
    pub client_presents_token: bool,
    /// The console's port (an OAuth redirect URI names it); else any.
    pub console_port: Option<u16>,
    /// The metrics (HTTP) port; `None`: any free one.
    pub metrics_port: Option<u16>,
}

/// A running `sms`.
pub struct SmsProc {
    pub proc: Proc,
    pub grpc: String,
    pub metrics: String,
    /// The console's base URL (`https://` under TLS); empty when it is
    /// off (no token to sign in with).
    pub console: String,
    pub options: SmsOptions,
    workdir: tempfile::TempDir,
}

impl SmsProc {
    pub fn start(mut options: SmsOptions) -> SmsProc {
        let workdir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let port = *options.port.get_or_insert_with(free_port);
        let ready = workdir.path().join("ready.json");
        let (mut cmd, host) = match &options.place {
            Some(place) => (place.command(bin("sms")), place.ip.to_string()),
            None => (Command::new(bin("sms")), "127.0.0.1".to_string()),
        };
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("{host}:{port}"))
            .arg("--metrics-listen")
            .arg(format!("{host}:{}", options.metrics_port.unwrap_or(0)))
            .arg("--console-listen")
            .arg(format!("{host}:{}", options.console_port.unwrap_or(0)))
            .arg("--ready-file")
            .arg(&ready)
            .env_remove("SMS_ADMIN_TOKEN_FILE")
            .env_remove("SMS_CONSOLE_LISTEN")
            .env_remove("SMS_VIEWER_TOKEN_FILE")
            .env_remove("SMS_TLS_CA")
            .env_remove("SMS_TLS_CERT")
            .env_remove("SMS_TLS_KEY")
            .env_remove("SMS_INSECURE");
        if let Some(dir) = &options.mcp_dir {
            cmd.arg("--mcp-dir").arg(dir);
        }
        if let Some(etcd) = &options.etcd {
            cmd.arg("--etcd-endpoints").arg(etcd);
        }
        if let Some(token) = &options.admin_token {
            let file = workdir.path().join("admin-token");
            std::fs::write(&file, token).unwrap_or_else(|e| panic!("token file: {e}"));
            cmd.arg("--admin-token-file").arg(file);
        }
        if let Some(tls) = &options.tls {
            cmd.args(tls.args());
        }
        cmd.args(&options.extra);
        if let Some(ms) = options.progress_interval_ms {
            cmd.arg("--progress-interval-ms").arg(ms.to_string());
        }
        if let Some(n) = options.history_len {
            cmd.arg("--history-len").arg(n.to_string());
        }
        let mut proc = Proc::spawn("sms", cmd, workdir.path().join("sms.log"));
        let ready_json = eventually("sms to be ready", Duration::from_secs(30), || {
            if !proc.is_running() {
                panic!("sms exited at start:\n{}", proc.log());
            }
            std::fs::read_to_string(&ready).map_err(|e| e.to_string())
        });
        let ready: serde_json::Value =
            serde_json::from_str(&ready_json).unwrap_or_else(|e| panic!("ready file: {e}"));
        let metrics = ready["metrics"].as_str().unwrap_or_default().to_string();
        // With TLS the endpoint is HTTPS, verified with SMS's CA.
        let metrics = match &options.tls {
            Some(tls) if !metrics.is_empty() => {
                crate::http::trust(&tls.ca);
                format!("https://{metrics}")
            }
            _ => metrics,
        };
        let console = match ready["console"].as_str() {
            Some(addr) if options.tls.is_some() => format!("https://{addr}"),
            Some(addr) => format!("http://{addr}"),
            None => String::new(),
        };
        SmsProc {
            grpc: ready["grpc"].as_str().unwrap_or_default().to_string(),
            metrics,
            console,
            proc,
            options,
            workdir,
        }
    }

    /// Stops this SMS and starts another with the same options and port.
    pub fn restart(mut self) -> SmsProc {
        self.proc.stop();
        self.start_again()
    }

    /// SIGKILLs this SMS (a crash: nothing flushed, no goodbye) and starts
    /// another with the same options and port.
    pub fn crash_restart(mut self) -> SmsProc {
        self.proc.kill();
        self.start_again()
    }

    fn start_again(self) -> SmsProc {
        let options = self.options.clone();
        drop(self);
        SmsProc::start(options)
    }

    /// Runs `sms <args>` as a client of this SMS, with
    /// [`SmsOptions::client_tls`] and without a token; returns (exit code,
    /// stdout, stderr).
    pub fn client(&self, args: &[&str]) -> (i32, String, String) {
        let token = self
            .options
            .admin_token
            .as_deref()
            .filter(|_| self.options.client_presents_token);
        self.client_with_token(args, token)
    }

    /// [`SmsProc::client`] with `SMS_ADMIN_TOKEN` set to `token`.
    pub fn client_with_token(&self, args: &[&str], token: Option<&str>) -> (i32, String, String) {
        let mut cmd = Command::new(bin("sms"));
        cmd.args(args).arg("--addr").arg(&self.grpc);
        if let Some(tls) = &self.options.client_tls {
            cmd.args(tls.args());
        }
        cmd.env_remove("SMS_ADMIN_TOKEN")
            .env_remove("SPEAR_TOKEN_FILE")
            .env_remove("SPEAR_TLS_CA")
            .env_remove("SPEAR_TLS_CERT")
            .env_remove("SPEAR_TLS_KEY");
        if let Some(token) = token {
            cmd.env("SMS_ADMIN_TOKEN", token);
        }
        let output = cmd
            .output()
            .unwrap_or_else(|e| panic!("run sms client: {e}"));
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Runs `sms <args>` with exactly the TLS flags `tls` (a stranger's, or
    /// none) and no token; returns (exit code, stdout and stderr).
    pub fn client_as(&self, args: &[&str], tls: &[String]) -> (i32, String) {
        let out = Command::new(bin("sms"))
            .args(args)
            .arg("--addr")
            .arg(&self.grpc)
            .args(tls)
            .env_remove("SMS_ADMIN_TOKEN")
            .env_remove("SPEAR_TOKEN_FILE")
            .env_remove("SPEAR_TLS_CA")
            .env_remove("SPEAR_TLS_CERT")
            .env_remove("SPEAR_TLS_KEY")
            .output()
            .unwrap_or_else(|e| panic!("run sms client: {e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), text)
    }

    /// `sms status --json`, as an admin (the configured token or client
    /// certificate).
    pub fn status(&self) -> serde_json::Value {
        let token = self.options.admin_token.as_deref();
        let (code, out, err) = self.client_with_token(&["status", "--json"], token);
        assert_eq!(code, 0, "sms status failed: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("status JSON: {e}: {out}"))
    }

    /// `node_id`'s row of [`SmsProc::status`] (`Null` when SMS does not
    /// know it).
    pub fn node(&self, node_id: &str) -> serde_json::Value {
        self.status()["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["node_id"] == node_id)
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    }

    pub fn workdir(&self) -> &Path {
        self.workdir.path()
    }
}

/// A running `spearlet`.
pub struct SpearletProc {
    pub proc: Proc,
    pub http: String,
    pub state_dir: PathBuf,
    pub node_id: String,
    sms: String,
    extra: Vec<String>,
    place: Option<crate::netns::Place>,
}

impl SpearletProc {
    /// Starts a spearlet syncing from `sms` (one address, or several comma
    /// separated) with its state in `state_dir`.
    pub fn start(node_id: &str, sms: &str, state_dir: &Path) -> SpearletProc {
        Self::start_with(node_id, sms, state_dir, &[])
    }

    /// [`SpearletProc::start`] with more `spearlet run` arguments (such as
    /// `--config node.toml`).
    pub fn start_with(
        node_id: &str,
        sms: &str,
        state_dir: &Path,
        extra: &[String],
    ) -> SpearletProc {
        Self::start_in(None, node_id, sms, state_dir, extra)
    }

    /// [`SpearletProc::start_with`] in a network namespace, listening on
    /// its address (the node then needs TLS, or `--insecure` in `extra`).
    pub fn start_in(
        place: Option<&crate::netns::Place>,
        node_id: &str,
        sms: &str,
        state_dir: &Path,
        extra: &[String],
    ) -> SpearletProc {
        // The HTTP port is chosen here (free_port) and bound by the
        // spearlet a moment later; another process on this machine may
        // take it in between. That start is retried on a new port.
        let mut attempts = 0;
        let (proc, http) = loop {
            attempts += 1;
            let port = free_port();
            let (mut cmd, host) = match place {
                Some(place) => (place.command(bin("spearlet")), place.ip.to_string()),
                None => (Command::new(bin("spearlet")), "127.0.0.1".to_string()),
            };
            let listen = format!("{host}:{port}");
            // With TLS the endpoint is HTTPS, verified with the node's CA.
            let ca = extra
                .iter()
                .position(|a| a == "--tls-ca")
                .and_then(|i| extra.get(i + 1));
            let http = match ca {
                Some(ca) => {
                    crate::http::trust(Path::new(ca));
                    format!("https://{listen}")
                }
                None => listen.clone(),
            };
            cmd.arg("run")
                .arg("--sms")
                .arg(sms)
                .arg("--state-dir")
                .arg(state_dir)
                .arg("--node-id")
                .arg(node_id)
                .arg("--metrics-listen")
                .arg(&listen)
                .arg("--listen")
                .arg(format!("{host}:0"))
                .args(extra);
            let log = state_dir.with_extension("log");
            let mut proc = Proc::spawn(&format!("spearlet {node_id}"), cmd, log);
            let mut lost_port = false;
            eventually("spearlet HTTP endpoint", Duration::from_secs(30), || {
                if !proc.is_running() {
                    let log = proc.log();
                    if attempts < 3 && log.contains(&format!("cannot listen on {listen}")) {
                        lost_port = true;
                        return Ok(());
                    }
                    panic!("spearlet exited at start:\n{log}");
                }
                crate::http::get(&http, "/livez").map(drop)
            });
            if !lost_port {
                break (proc, http);
            }
        };
        SpearletProc {
            proc,
            http,
            state_dir: state_dir.to_path_buf(),
            node_id: node_id.to_string(),
            sms: sms.to_string(),
            extra: extra.to_vec(),
            place: place.cloned(),
        }
    }

    /// Stops this spearlet and starts it again with the same state dir.
    pub fn restart(mut self) -> SpearletProc {
        self.proc.stop();
        self.start_again()
    }

    /// SIGKILLs this spearlet (a crash: nothing persisted at shutdown) and
    /// starts it again with the same state dir.
    pub fn crash_restart(mut self) -> SpearletProc {
        self.proc.kill();
        self.start_again()
    }

    /// Starts this spearlet again (after `proc.kill()` or `proc.stop()`)
    /// with the same state dir, in place.
    pub fn start_in_place(&mut self) {
        let again = SpearletProc::start_in(
            self.place.as_ref(),
            &self.node_id,
            &self.sms,
            &self.state_dir,
            &self.extra,
        );
        *self = again;
    }

    fn start_again(self) -> SpearletProc {
        let (node_id, sms, state_dir, extra, place) = (
            self.node_id.clone(),
            self.sms.clone(),
            self.state_dir.clone(),
            self.extra.clone(),
            self.place.clone(),
        );
        drop(self);
        SpearletProc::start_in(place.as_ref(), &node_id, &sms, &state_dir, &extra)
    }

    /// The node's live registry view (`GET /registry`).
    pub fn registry(&self) -> Result<serde_json::Value, String> {
        crate::http::get_json(&self.http, "/registry")
    }

    /// The node's sync status (`GET /status`).
    pub fn status(&self) -> Result<serde_json::Value, String> {
        crate::http::get_json(&self.http, "/status")
    }

    /// The server ids of the registry the node persisted (what `spearlet
    /// mcp --state-dir` and a restart read), sorted.
    pub fn persisted_servers(&self) -> Vec<String> {
        spearlet::persist::StateDir::at(&self.state_dir)
            .load_registry()
            .servers
            .into_keys()
            .collect()
    }

    /// The applied-history log lines.
    pub fn applied_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.state_dir.join("applied.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}
