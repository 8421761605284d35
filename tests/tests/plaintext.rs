//! Plaintext beyond loopback (issue 25): allowed only when asked
//! (`--insecure`), and then loud — a warning in the log, `sms_insecure` /
//! `spearlet_insecure`, a line in `sms status` and `insecure` in the node's
//! `/status`. The CLI never sends the admin token in clear beyond loopback
//! unless told, and a node never follows a plaintext SMS beyond loopback
//! unless told. SMS runs in its own network namespace, so "beyond
//! loopback" is a real interface on this machine.

use std::process::Command;

use spear_tests::netns::{self, Bridge};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};

const TOKEN: &str = "admin-token-0123456789abcdef";

#[test]
fn plaintext_beyond_loopback_is_loud_and_carries_no_token_unless_asked() {
    if !netns::available() {
        panic!("this test needs root and iproute2 for network namespaces (scripts/setup.sh installs iproute2)");
    }
    let mut bridge = Bridge::new();
    let ns = bridge.netns();
    let sms = SmsProc::start(SmsOptions {
        admin_token: Some(TOKEN.into()),
        place: Some(ns.place()),
        extra: vec!["--insecure".into()],
        ..Default::default()
    });
    assert!(
        sms.proc.log().contains("INSECURE: SMS serves plaintext"),
        "{}",
        sms.proc.log()
    );

    // The CLI refuses to put the token on the wire in clear...
    let (code, _, err) = sms.client_with_token(&["status"], Some(TOKEN));
    assert_ne!(code, 0);
    assert!(
        err.contains("refusing to send the admin token in clear") && err.contains("--tls-ca"),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "{err}");
    // ...unless told, and then status says what is wrong.
    let (code, out, err) = sms.client_with_token(&["status", "--insecure"], Some(TOKEN));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("INSECURE: SMS serves plaintext beyond loopback"),
        "{out}"
    );
    let metrics = spear_tests::http::get(&sms.metrics, "/metrics").unwrap();
    assert!(metrics.contains("\nsms_insecure 1\n"), "{metrics}");

    // A node will not follow it in plaintext unless told.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(bin("spearlet"))
        .args(["run", "--sms", &sms.grpc, "--metrics-listen", "off"])
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("SPEARLET_INSECURE")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("would follow SMS at")
            && text.contains("without TLS")
            && text.contains("--insecure"),
        "{text}"
    );
    let node = SpearletProc::start_with(
        "loud",
        &sms.grpc,
        &state.path().join("n"),
        &["--insecure".into()],
    );
    let status: serde_json::Value =
        serde_json::from_str(&spear_tests::http::get(&node.http, "/status").unwrap()).unwrap();
    assert_eq!(status["insecure"], true, "{status}");
    let metrics = spear_tests::http::get(&node.http, "/metrics").unwrap();
    assert!(metrics.contains("\nspearlet_insecure 1\n"), "{metrics}");
    assert!(
        node.proc
            .log()
            .contains("INSECURE: the node follows SMS at"),
        "{}",
        node.proc.log()
    );
}

#[test]
fn loopback_plaintext_is_not_called_insecure() {
    let sms = SmsProc::start(SmsOptions {
        admin_token: Some(TOKEN.into()),
        ..Default::default()
    });
    let (code, out, err) = sms.client_with_token(&["status"], Some(TOKEN));
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("INSECURE"), "{out}");
    let metrics = spear_tests::http::get(&sms.metrics, "/metrics").unwrap();
    assert!(metrics.contains("\nsms_insecure 0\n"), "{metrics}");
}
