//! Remote MCP servers over Streamable HTTP: the npm reference server in its
//! HTTP mode and a server written with the Python SDK.

use std::process::Command;

use spear_tests::peers::{npm_bin, python_http_server, python_sdk, HttpPeer};
use spear_tests::wait::free_port;

fn spearlet_mcp(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    spear_tests::peers::spearlet_mcp(args, env, "warn")
}

#[test]
fn server_everything_over_streamable_http() {
    let peer = HttpPeer::start_on_a_free_port("server-everything http", |_| {
        let mut cmd = Command::new(npm_bin("mcp-server-everything"));
        cmd.arg("streamableHttp");
        cmd
    });
    let url = peer.url("/mcp");
    let (code, out, err) = spearlet_mcp(&["list-tools", "--url", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("echo")), "{out}");
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--url",
            &url,
            "--tool",
            "echo",
            "--args",
            r#"{"message": "over http"}"#,
        ],
        &[],
    );
    assert_eq!((code, out.trim()), (0, "Echo: over http"), "{err}");
}

#[test]
fn python_sdk_server_over_streamable_http() {
    let peer = HttpPeer::start_on_a_free_port("python sdk server", |port| {
        let mut cmd = Command::new(python_sdk());
        cmd.arg(python_http_server()).arg(port.to_string());
        cmd
    });
    let url = peer.url("/mcp");
    let (code, out, err) = spearlet_mcp(&["list-tools", "--url", &url], &[]);
    assert_eq!(code, 0, "{err}");
    for tool in ["add", "fail", "authorization"] {
        assert!(out.lines().any(|l| l.starts_with(tool)), "{tool}: {out}");
    }
    // The handshake names 2025-11-25, the newest version that has an
    // `initialize` (not rmcp's newest, 2026-07-28), and the server agrees.
    assert!(err.contains("MCP protocol 2025-11-25"), "{err}");
    let (code, out, err) = spearlet_mcp(&["call", "--url", &url, "--tool", "handshake"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().next(), Some("2025-11-25 spearlet"), "{out}");
    let (code, out, _) = spearlet_mcp(
        &[
            "call",
            "--url",
            &url,
            "--tool",
            "add",
            "--args",
            r#"{"a": 20, "b": 22}"#,
        ],
        &[],
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("42") && out.contains(r#"{"result":42}"#),
        "text and structuredContent: {out}"
    );
    let (code, out, _) = spearlet_mcp(
        &[
            "call",
            "--url",
            &url,
            "--tool",
            "fail",
            "--args",
            r#"{"reason": "disk on fire"}"#,
        ],
        &[],
    );
    assert_eq!(code, 1, "isError is kept");
    assert!(out.contains("disk on fire"), "{out}");
    // A header given as a reference is resolved on the node.
    let header = "Authorization=Bearer ${PEER_TOKEN}";
    let (_, out, err) = spearlet_mcp(
        &[
            "call",
            "--url",
            &url,
            "--header",
            header,
            "--tool",
            "authorization",
        ],
        &[("PEER_TOKEN", "python-peer-token")],
    );
    assert!(out.starts_with("authorized"), "{out} {err}");
    let (_, out, _) = spearlet_mcp(&["call", "--url", &url, "--tool", "authorization"], &[]);
    assert!(out.starts_with("unauthorized"), "{out}");
}

#[test]
fn server_everything_over_the_legacy_sse_transport() {
    let peer = HttpPeer::start_on_a_free_port("server-everything sse", |_| {
        let mut cmd = Command::new(npm_bin("mcp-server-everything"));
        cmd.arg("sse");
        cmd
    });
    let url = peer.url("/sse");
    let (code, out, err) = spearlet_mcp(&["list-tools", "--sse", "--url", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("get-sum")), "{out}");
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--sse",
            "--url",
            &url,
            "--tool",
            "get-sum",
            "--args",
            r#"{"a": 1, "b": 2}"#,
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains('3'), "{out}");
    let (code, out, _) = spearlet_mcp(
        &[
            "call",
            "--sse",
            "--url",
            &url,
            "--tool",
            "get-sum",
            "--args",
            r#"{"a": "x"}"#,
        ],
        &[],
    );
    assert_eq!(code, 1, "{out}");
}

/// A Streamable HTTP server that restarts loses its sessions; the node's
/// next call must still succeed (re-initialising after the 404 for the old
/// session, or reconnecting once its backoff allows).
#[test]
fn a_restarted_http_server_is_used_again_without_restarting_the_node() {
    use std::sync::Arc;
    use std::time::Duration;

    use spear_proto::v1::{ServerSpec, Transport};
    use spearlet::connections::Connections;
    use spearlet::registry::{RegistryHandle, RegistryView};

    let port = free_port();
    let start = || {
        let mut cmd = Command::new(python_sdk());
        cmd.arg(python_http_server()).arg(port.to_string());
        HttpPeer::start("python sdk server", cmd, port)
    };
    let mut peer = start();
    let spec = ServerSpec {
        id: "py".into(),
        transport: Transport::StreamableHttp as i32,
        url: peer.url("/mcp"),
        enabled: true,
        ..Default::default()
    };
    let view = RegistryView::from_specs([spec]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let connections = Connections::new(RegistryHandle::new(view), Arc::new(|_: &str| Ok(None)));
        let args = serde_json::json!({"a": 1, "b": 2}).as_object().cloned();
        let first = connections.call("py", "add", args.clone()).await.unwrap();
        assert!(first.text.starts_with('3'), "{}", first.text);

        tokio::task::block_in_place(|| {
            peer.proc.kill();
            peer = start();
        });
        let mut last = String::new();
        for _ in 0..50 {
            match connections.call("py", "add", args.clone()).await {
                Ok(result) if result.text.starts_with('3') => return connections.shutdown().await,
                Ok(result) => last = result.text,
                Err(error) => last = error.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the node never used the restarted server again; last: {last}");
    });
}

/// A hostile server tries to move the node's secret header to another
/// origin: a legacy SSE `endpoint` on another port, and a Streamable HTTP
/// 307 to it. The node refuses both, saying why, and the other origin never
/// sees the secret (nor any request from the node).
#[test]
fn secret_headers_never_follow_a_server_to_another_origin() {
    let (port, thief) = (free_port(), free_port());
    let logs = tempfile::tempdir().unwrap();
    let stolen = logs.path().join("thief.log");
    let mut cmd = Command::new("python3");
    cmd.arg(spear_tests::tasks::repo_file("tests/peers/cross_origin.py"))
        .arg(port.to_string())
        .arg(thief.to_string())
        .arg(&stolen);
    let peer = HttpPeer::start("cross-origin server", cmd, port);
    let secret = "X-Api-Key=sk-cross-origin-SECRET";

    let sse = peer.url("/sse");
    let (code, out, err) = spearlet_mcp(
        &["list-tools", "--url", &sse, "--sse", "--header", secret],
        &[],
    );
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("another origin"), "{err}");

    let mcp = peer.url("/mcp");
    let (code, out, err) = spearlet_mcp(&["list-tools", "--url", &mcp, "--header", secret], &[]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("another origin"), "{err}");

    let seen = std::fs::read_to_string(&stolen).unwrap_or_default();
    assert!(
        !seen.contains("SECRET"),
        "the other origin got the secret:\n{seen}"
    );
    assert_eq!(seen, "", "the node sent a request to the other origin");
    assert!(!err.contains("SECRET"), "{err}");
}
