//! Real nodes joining with a token of their own (issue 38, item 3), on the real binaries: a
//! node refuses SMS's own secret, joins once and keeps its token across a restart; over TLS, a
//! join token gets a node its certificate from SMS's CA (for its own id only) and it then
//! speaks mutual TLS.

use std::path::PathBuf;
use std::time::Duration;

use spear_tests::node_join::{join_token, sms, SECRET};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

/// Waits until `node` says it is synced with SMS.
fn synced(node: &SpearletProc, what: &str) {
    eventually(what, Duration::from_secs(30), || {
        let status = node.status()?;
        (status["sync_state"] == "synced")
            .then_some(())
            .ok_or(status.to_string())
    });
}

fn write(path: PathBuf, text: &str) -> PathBuf {
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

#[test]
fn a_real_node_joins_once_and_keeps_its_own_token_across_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sms = sms(dir.path());
    // Given SMS's own secret, a node refuses to start, and says what to do.
    let state = dir.path().join("node-state");
    let out = std::process::Command::new(bin("spearlet"))
        .args([
            "run",
            "--sms",
            &sms.grpc,
            "--node-id",
            "node-c",
            "--metrics-listen",
            "off",
        ])
        .arg("--state-dir")
        .arg(&state)
        .arg("--join-token-file")
        .arg(dir.path().join("join-secret"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("sms nodes join-token node-c"), "{text}");
    assert!(!text.contains(SECRET), "{text}");

    let file = write(dir.path().join("join-c"), &join_token(&sms, "node-c"));
    let extra = vec!["--join-token-file".to_string(), file.display().to_string()];
    let node = SpearletProc::start_with("node-c", &sms.grpc, &state, &extra);
    let listed = || {
        let status = sms.status();
        status["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["node_id"] == "node-c")
            .then_some(())
            .ok_or(status.to_string())
    };
    eventually("SMS to list node-c", Duration::from_secs(30), listed);
    let kept = state.join("node-token");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&kept)
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the node token is the node's alone");
    // Restarted, it presents the token it kept (its join token is spent).
    let node = node.restart();
    synced(&node, "node-c to sync again");
    assert!(!node.proc.log().contains("refused"), "{}", node.proc.log());
}

#[test]
fn over_tls_a_join_token_gets_the_node_its_certificate_from_smss_ca() {
    let certs = spear_tests::certs::Certs::new("spear.test");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let secret = write(dir.path().join("join-secret"), SECRET);
    let sms = SmsProc::start(SmsOptions {
        tls: Some(certs.sms()),
        client_tls: Some(certs.admin("ops")),
        extra: vec![
            "--join-token-file".into(),
            secret.display().to_string(),
            "--ca-dir".into(),
            certs.dir.display().to_string(),
        ],
        ..Default::default()
    });
    let (code, token, err) = sms.client(&["nodes", "join-token", "node-t"]);
    assert_eq!(code, 0, "{err}");
    let file = write(dir.path().join("join-t"), token.trim());
    let state = dir.path().join("state-t");
    let extra = vec![
        "--tls-ca".to_string(),
        certs.ca().display().to_string(),
        "--join-token-file".to_string(),
        file.display().to_string(),
    ];
    let node = SpearletProc::start_with("node-t", &sms.grpc, &state, &extra);
    eventually(
        "node-t to sync over mutual TLS",
        Duration::from_secs(30),
        || {
            let status = node.status()?;
            (status["sync_state"] == "synced")
                .then_some(())
                .ok_or(status.to_string())
        },
    );
    // Its certificate is SMS's CA's, for node-t only; its key is its own.
    let pem = std::fs::read_to_string(state.join("tls/node.pem")).unwrap_or_else(|e| panic!("{e}"));
    let (_, parsed) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let cert = parsed.parse_x509().unwrap_or_else(|e| panic!("{e}"));
    let sans = format!("{:?}", cert.subject_alternative_name());
    assert!(sans.contains("spiffe://spear.test/node/node-t"), "{sans}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(state.join("tls/node.key"))
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions(),
    );
    assert_eq!(mode & 0o077, 0);
    // The same token again, by another node: refused, nothing written.
    let other = dir.path().join("state-u");
    let out = std::process::Command::new(bin("spearlet"))
        .args([
            "run",
            "--sms",
            &sms.grpc,
            "--node-id",
            "node-t",
            "--metrics-listen",
            "off",
        ])
        .arg("--state-dir")
        .arg(&other)
        .args(&extra)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("already used"), "{text}");
    assert!(!other.join("tls/node.pem").exists());
    // Restarted, it uses the certificate it kept.
    let node = node.restart();
    synced(&node, "node-t to sync again");
}
