//! Plaintext beyond loopback (issue 25): allowed only when asked
//! (`--insecure`), and then loud — a warning in the log, `sms_insecure` /
//! `spearlet_insecure`, a line in `sms status` and `insecure` in the node's
//! `/status`. The CLI never sends the admin token in clear beyond loopback
//! unless told, and a node never follows a plaintext SMS beyond loopback
//! unless told. SMS runs in its own network namespace, so "beyond
//! loopback" is a real interface on this machine.
//!
//! Plaintext is never anonymous: beyond loopback each node has its own
//! token, bound to its id (`sms nodes join-token NODE` makes a one-time
//! join token that the node exchanges for it), and without one nobody can
//! heartbeat as a node, watch the registry, take an OAuth token or hand a
//! node an invocation; with node-b's, nobody can do so as node-a.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::invocation_client::InvocationClient;
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{AccessTokenRequest, HeartbeatRequest, InvokeRequest, WatchRequest};
use spear_tests::netns::{self, Bridge};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::runtime;
use spear_tests::tasks::guest;
use spear_tests::wait::eventually;
use tonic::transport::{Channel, Endpoint};

const TOKEN: &str = "admin-token-0123456789abcdef";
const JOIN: &str = "join-token-0123456789abcdef";

/// SMS's join secret in a file, as SMS reads it (never a node).
fn join_file(dir: &Path) -> PathBuf {
    let path = dir.join("join-secret");
    std::fs::write(&path, format!("{JOIN}\n")).unwrap();
    path
}

/// `sms nodes join-token NODE` at `sms`, in a file of `dir`.
fn node_join_file(sms: &SmsProc, node: &str, dir: &Path) -> PathBuf {
    let (code, out, err) = sms.client_with_token(
        &["nodes", "join-token", node, "--ttl", "10m", "--insecure"],
        Some(TOKEN),
    );
    assert_eq!(code, 0, "{err}");
    let path = dir.join(format!("join-{node}"));
    std::fs::write(&path, out).unwrap();
    path
}

/// A bridge for network namespaces: "beyond loopback" on this machine.
fn bridge() -> Bridge {
    if !netns::available() {
        panic!("this test needs root and iproute2 for network namespaces (scripts/setup.sh installs iproute2)");
    }
    Bridge::new()
}

/// SMS in plaintext at `place`, with the admin token and the join token.
fn insecure_sms(place: &spear_tests::netns::Place, join: &Path) -> SmsProc {
    SmsProc::start(SmsOptions {
        admin_token: Some(TOKEN.into()),
        place: Some(place.clone()),
        extra: insecure_with(join),
        ..Default::default()
    })
}

/// `--insecure` with the join token file, as SMS and nodes take them.
fn insecure_with(join: &Path) -> Vec<String> {
    vec![
        "--insecure".into(),
        "--join-token-file".into(),
        join.display().to_string(),
    ]
}

/// A plaintext channel to `addr`.
async fn channel(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn with_join<T>(message: T, join: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(join) = join {
        request
            .metadata_mut()
            .insert(spear_identity::JOIN_TOKEN_HEADER, join.parse().unwrap());
    }
    request
}

/// What a caller without the join token (or with `join`, a guess) gets
/// for each thing a node does; every answer must be a refusal.
async fn as_a_node(
    sms: &str,
    node: &str,
    join: Option<&str>,
) -> Vec<(&'static str, tonic::Status)> {
    let channel = channel(sms).await;
    let mut refused = Vec::new();
    let heartbeat = NodesClient::new(channel.clone())
        .heartbeat(with_join(
            HeartbeatRequest {
                node_id: node.into(),
                invoke_addr: "127.0.0.1:1".into(),
                ..Default::default()
            },
            join,
        ))
        .await;
    refused.push(("heartbeat", heartbeat.unwrap_err()));
    let watch = match RegistryClient::new(channel.clone())
        .watch(with_join(
            WatchRequest {
                node_id: node.into(),
                ..Default::default()
            },
            join,
        ))
        .await
    {
        Ok(mut stream) => stream.get_mut().message().await.unwrap_err(),
        Err(status) => status,
    };
    refused.push(("watch", watch));
    let token = CredentialsClient::new(channel)
        .get_access_token(with_join(
            AccessTokenRequest {
                server_id: "docs".into(),
                ..Default::default()
            },
            join,
        ))
        .await;
    refused.push(("access token", token.unwrap_err()));
    refused
}

#[test]
fn plaintext_beyond_loopback_is_loud_and_carries_no_token_unless_asked() {
    let mut bridge = bridge();
    let ns = bridge.netns();
    let dir = tempfile::tempdir().unwrap();
    let join = join_file(dir.path());
    let sms = insecure_sms(&ns.place(), &join);
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
    // Nor without the join token that tells it from a stranger.
    let out = Command::new(bin("spearlet"))
        .args([
            "run",
            "--sms",
            &sms.grpc,
            "--metrics-listen",
            "off",
            "--insecure",
        ])
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("SPEARLET_JOIN_TOKEN_FILE")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("without --join-token-file"), "{text}");
    let node_join = node_join_file(&sms, "loud", dir.path());
    let node = SpearletProc::start_with(
        "loud",
        &sms.grpc,
        &state.path().join("n"),
        &insecure_with(&node_join),
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

/// SMS beyond loopback without TLS needs both tokens, or it does not start.
#[test]
fn insecure_without_the_tokens_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin-token");
    std::fs::write(&admin, TOKEN).unwrap();
    let join = join_file(dir.path());
    let serve = |extra: &[&str]| {
        let out = Command::new(bin("sms"))
            .args([
                "serve",
                "--listen",
                "0.0.0.0:0",
                "--metrics-listen",
                "off",
                "--insecure",
            ])
            .args(extra)
            .env_remove("SMS_ADMIN_TOKEN_FILE")
            .env_remove("SMS_JOIN_TOKEN_FILE")
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let admin = admin.display().to_string();
    let join = join.display().to_string();
    let err = serve(&["--admin-token-file", &admin]);
    assert!(
        err.contains("without --join-token-file") && err.contains("act as a node"),
        "{err}"
    );
    let err = serve(&["--join-token-file", &join]);
    assert!(
        err.contains("without --admin-token-file") && err.contains("act as an admin"),
        "{err}"
    );
}

/// On a plaintext SMS beyond loopback, a caller without the join token (or
/// with a guessed one) can do nothing a node does; the node that holds it
/// syncs, heartbeats and runs what SMS sends it, and SMS's invocations
/// carry the token the node asks for.
#[test]
fn without_the_join_token_nobody_acts_as_a_node_on_plaintext() {
    let mut bridge = bridge();
    let ns = bridge.netns();
    let dir = tempfile::tempdir().unwrap();
    let join = join_file(dir.path());
    let sms = insecure_sms(&ns.place(), &join);
    let rt = runtime();
    for guess in [None, Some("join-guess-guess-guess-guess")] {
        for (what, status) in rt.block_on(as_a_node(&sms.grpc, "victim", guess)) {
            assert_eq!(
                status.code(),
                tonic::Code::Unauthenticated,
                "{what}: {status:?}"
            );
            assert!(
                status.message().contains("join token"),
                "{what}: {}",
                status.message()
            );
            assert!(
                !status.message().contains("guess"),
                "{what}: {}",
                status.message()
            );
        }
    }
    let (code, out, err) = sms.client_with_token(&["status", "--insecure"], Some(TOKEN));
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("victim"), "no heartbeat was taken:\n{out}");

    // The node holding the token (in a namespace of its own, so SMS can
    // reach its Invocation port) syncs and heartbeats...
    let node_ns = bridge.netns();
    let state = tempfile::tempdir().unwrap();
    let node_join = node_join_file(&sms, "holder", dir.path());
    let node = SpearletProc::start_in(
        Some(&node_ns.place()),
        "holder",
        &sms.grpc,
        &state.path().join("n"),
        &insecure_with(&node_join),
    );
    eventually("SMS to list the node", Duration::from_secs(30), || {
        let (_, out, err) = sms.client_with_token(&["status", "--insecure"], Some(TOKEN));
        if out.contains("holder") {
            Ok(())
        } else {
            Err(format!("{out}{err}"))
        }
    });
    // (Its /status answers loopback only; SMS says where it is.)
    let metrics = || spear_tests::http::get(&node.http, "/metrics").unwrap();
    eventually("the node to sync", Duration::from_secs(30), || {
        let m = metrics();
        m.contains("spearlet_sync_state{state=\"synced\"} 1")
            .then_some(())
            .ok_or(m)
    });
    let (_, out, _) = sms.client_with_token(&["status", "--json", "--insecure"], Some(TOKEN));
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let status = status["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["node_id"] == "holder")
        .cloned()
        .unwrap_or_default();

    // ...and its Invocation port asks the same of whoever calls it: SMS
    // presents the token, a stranger cannot. (A file module is not one
    // the node's policy takes, which is the answer SMS gets back.)
    let invoke = status["invoke_addr"].as_str().unwrap().to_string();
    let refused = rt.block_on(async {
        InvocationClient::new(channel(&invoke).await)
            .invoke(InvokeRequest {
                task_id: "any".into(),
                ..Default::default()
            })
            .await
            .unwrap_err()
    });
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(
        refused.message().contains("join token"),
        "{}",
        refused.message()
    );
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("plain.json");
    std::fs::write(&config, r#"{"limits": {"wall_ms": 10000}}"#).unwrap();
    let module = guest("fs-agent").display().to_string();
    let config = config.display().to_string();
    let (code, _, err) = sms.client_with_token(
        &[
            "tasks",
            "register",
            "--id",
            "plain",
            "--module",
            &module,
            "--config",
            &config,
            "--insecure",
        ],
        Some(TOKEN),
    );
    assert_eq!(code, 0, "{err}");
    let (_, out, err) = sms.client_with_token(
        &["invoke", "plain", "--node", "holder", "--insecure"],
        Some(TOKEN),
    );
    assert!(
        !format!("{out}{err}").contains("join token"),
        "SMS's invocation must carry the token:\n{out}{err}"
    );
    // The node's own answer (its module policy) shows its gate let SMS in.
    assert!(
        format!("{out}{err}").contains("this node's policy.modules"),
        "the node answered SMS's invocation:\n{out}{err}"
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
