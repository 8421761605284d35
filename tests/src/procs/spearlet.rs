//! A real `spearlet` as a child process: started against an SMS, restarted in place, and read
//! through its HTTP endpoint and its state dir.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{bin, Proc};
use crate::wait::{eventually, free_port};

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
