//! A real `sms` as a child process: how to start it ([`SmsOptions`]), its addresses, restarts,
//! and its CLI run against it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{bin, Proc};
use crate::wait::{eventually, free_port};

/// What SMS's OAuth client may reach beyond public addresses in tests
/// (`--egress`): the loopback address the tests' servers listen on.
pub const TEST_EGRESS: &str = "127.0.0.1/32";

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
            .env_remove("SMS_INSECURE")
            .env_remove("SMS_EGRESS");
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
        // The tests' authorization servers run on 127.0.0.1; every other
        // non-public address stays refused, as a test of SMS's guard needs.
        if !options.extra.iter().any(|arg| arg == "--egress") {
            cmd.arg("--egress").arg(TEST_EGRESS);
        }
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
