//! People signed in at a real OpenID Provider (oidc-provider,
//! `peers/oidc_people.mjs`), for the tests of whose call a run is: the
//! provider, SMS's flags to trust it, and `sms invoke` as a person.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::certs::Certs;
use crate::peers::{node22, npm_dir, peer_file};
use crate::procs::{bin, Proc};
use crate::tasks::Cluster;
use crate::wait::{eventually, free_port};

/// An OpenID Provider on a port of its own; its issuer.
pub fn provider(dir: &std::path::Path, name: &str) -> (Proc, String) {
    provider_for(dir, name, None)
}

/// [`provider`], which also sends people back to `console_callback`.
pub fn provider_for(
    dir: &std::path::Path,
    name: &str,
    console_callback: Option<&str>,
) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(node22());
    cmd.arg(peer_file("oidc_people.mjs"))
        .arg(npm_dir())
        .arg(port.to_string())
        .args(console_callback);
    let proc = Proc::spawn(name, cmd, dir.join(format!("{name}.log")));
    let issuer = format!("http://127.0.0.1:{port}");
    eventually(
        "the OpenID Provider to listen",
        Duration::from_secs(30),
        || {
            let log = proc.log();
            log.contains("READY").then_some(()).ok_or(log)
        },
    );
    (proc, issuer)
}

/// SMS's arguments to trust `issuer`'s people (ID tokens for the client
/// "spear-people").
pub fn trusting(issuer: &str) -> Vec<String> {
    vec![
        "--oidc-issuer".into(),
        issuer.into(),
        "--oidc-audience".into(),
        "spear-people".into(),
    ]
}

/// `sms invoke --json TASK` as a person: SMS's CA only (no client
/// certificate, no admin token) and their token in `$ID_TOKEN`.
pub fn invoke_as(c: &Cluster, certs: &Certs, task: &str, token: &str) -> (i32, String) {
    let out = Command::new(bin("sms"))
        .args(["invoke", "--json", task, "--principal-token", "${ID_TOKEN}"])
        .arg("--addr")
        .arg(&c.sms.grpc)
        .arg("--tls-ca")
        .arg(certs.ca())
        .env("ID_TOKEN", token)
        .env_remove("SMS_ADMIN_TOKEN")
        .env_remove("SPEAR_TOKEN_FILE")
        .env_remove("SPEAR_TLS_CERT")
        .env_remove("SPEAR_TLS_KEY")
        .output()
        .unwrap_or_else(|e| panic!("sms invoke: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The run's JSON answer from `invoke_as`'s output (stdout comes first).
pub fn run_of(out: &str) -> Value {
    let end = out.rfind('}').map_or(0, |i| i + 1);
    serde_json::from_str(&out[..end]).unwrap_or_else(|e| panic!("{e}: {out}"))
}
