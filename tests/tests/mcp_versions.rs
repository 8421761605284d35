//! Both protocol generations against real servers: the Python SDK 1.x
//! (2025-11-25, `initialize`), the Python SDK 2.x (2026-07-28,
//! `server/discover` and per-request `_meta`) and the npm reference servers
//! over stdio. For each: the negotiated version, tools listed and called,
//! elicitation by policy (a server-to-client request on one, an
//! `input_required` retry on the other), progress that extends a call's
//! timeout up to its bound, and log notifications in the node's log,
//! bounded and redacted. Driven through `spearlet mcp`, as an operator
//! would; the catalog cache (`ttlMs`, tool order) through a node's
//! connections.

use std::process::Command;
use std::sync::Arc;

use spear_proto::v1::{ServerSpec, Transport};
use spearlet::connections::Connections;
use spearlet::mcp::{McpClient, SessionOptions, Timeouts, ToolList};
use spearlet::registry::{RegistryHandle, RegistryView};

use spear_tests::peers::{
    npm_bin, python2_http_server, python_http_server, python_sdk, python_sdk2, HttpPeer,
};
use spear_tests::wait::free_port;

fn spearlet_mcp(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    spear_tests::peers::spearlet_mcp(args, env, "info")
}

fn python1_peer() -> HttpPeer {
    HttpPeer::start_on_a_free_port("python sdk 1.x server", |port| {
        let mut cmd = Command::new(python_sdk());
        cmd.arg(python_http_server()).arg(port.to_string());
        cmd
    })
}

fn python2_peer() -> HttpPeer {
    HttpPeer::start_on_a_free_port("python sdk 2.x server", |port| {
        let mut cmd = Command::new(python_sdk2());
        cmd.arg(python2_http_server()).arg(port.to_string());
        cmd
    })
}

fn call(url: &str, tool: &str, args: &str, extra: &[&str]) -> (i32, String, String) {
    let mut all = vec!["call", "--url", url, "--tool", tool, "--args", args];
    all.extend_from_slice(extra);
    spearlet_mcp(&all, &[])
}

#[test]
fn a_2026_07_28_server_is_reached_through_discovery() {
    let peer = python2_peer();
    let url = peer.url("/mcp");
    let (code, out, err) = spearlet_mcp(&["list-tools", "--url", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("adhoc: MCP protocol 2026-07-28"), "{err}");
    for tool in ["add", "handshake", "ship", "work", "chatter"] {
        assert!(out.lines().any(|l| l.starts_with(tool)), "{tool}: {out}");
    }
    // The server sees the version in each request's `_meta`.
    let (code, out, err) = call(&url, "handshake", "{}", &[]);
    assert_eq!((code, out.lines().next()), (0, Some("2026-07-28")), "{err}");
    let (code, out, err) = call(&url, "add", r#"{"a": 40, "b": 2}"#, &[]);
    assert_eq!((code, out.lines().next()), (0, Some("42")), "{err}");
}

#[test]
fn older_servers_are_reached_through_initialize() {
    let peer = python1_peer();
    let (code, _, err) = spearlet_mcp(&["list-tools", "--url", &peer.url("/mcp")], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("adhoc: MCP protocol 2025-11-25"), "{err}");

    // The npm reference servers over stdio.
    let everything = npm_bin("mcp-server-everything");
    let everything = everything.to_str().unwrap();
    let (code, out, err) = spearlet_mcp(&["list-tools", "--", everything], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("adhoc: MCP protocol 2025-11-25"), "{err}");
    assert!(out.lines().any(|l| l.starts_with("echo")), "{out}");
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--tool",
            "get-sum",
            "--args",
            r#"{"a": 2, "b": 3}"#,
            "--",
            everything,
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().next(),
        Some("The sum of 2 and 3 is 5."),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.txt"), "stdio works").unwrap();
    let fs = npm_bin("mcp-server-filesystem");
    let root = dir.path().to_str().unwrap();
    let file = dir.path().join("n.txt");
    let args = serde_json::json!({ "path": file }).to_string();
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--tool",
            "read_text_file",
            "--args",
            &args,
            "--",
            fs.to_str().unwrap(),
            root,
        ],
        &[],
    );
    assert_eq!(
        (code, out.lines().next()),
        (0, Some("stdio works")),
        "{err}"
    );
    let (code, _, err) = spearlet_mcp(&["list-tools", "--", fs.to_str().unwrap(), root], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("adhoc: MCP protocol 2025-11-25"), "{err}");
}

/// Elicitation in both styles: `decline` unless the operator says
/// otherwise, `accept_defaults` fills the schema's defaults.
#[test]
fn elicitation_follows_the_policy_in_both_generations() {
    let old = python1_peer();
    let new = python2_peer();
    for url in [old.url("/mcp"), new.url("/mcp")] {
        let (code, out, err) = call(&url, "ship", r#"{"parcel": "p1"}"#, &[]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out.lines().next(),
            Some("p1: not shipped (decline)"),
            "{url}"
        );
        let (code, out, err) = call(
            &url,
            "ship",
            r#"{"parcel": "p2"}"#,
            &["--elicitation", "accept-defaults"],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out.lines().next(),
            Some("p2: standard, insured=False"),
            "{url}"
        );
        // `prompt` with no terminal declines (and says why).
        let (_, out, err) = call(
            &url,
            "ship",
            r#"{"parcel": "p3"}"#,
            &["--elicitation", "prompt"],
        );
        assert_eq!(
            out.lines().next(),
            Some("p3: not shipped (decline)"),
            "{url}"
        );
        assert!(err.contains("there is no terminal to ask on"), "{err}");
    }
}

/// Progress restarts a call's timeout; silence does not; and progress
/// forever stops at the call's bound.
#[test]
fn progress_extends_a_call_up_to_its_bound() {
    let peer = python2_peer();
    let url = peer.url("/mcp");
    // 2.5 s of work in steps of 0.25 s, with a 1 s timeout: each progress
    // notification restarts it.
    let (code, out, err) = call(
        &url,
        "work",
        r#"{"seconds": 2.5, "every": 0.25}"#,
        &["--timeout-ms", "1000"],
    );
    assert_eq!(
        (code, out.lines().next()),
        (0, Some("worked 2.5s")),
        "{err}"
    );
    // The same work in silence times out.
    let (code, _, err) = call(
        &url,
        "work",
        r#"{"seconds": 30, "every": 0}"#,
        &["--timeout-ms", "1000"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("tools/call timed out after 1s"), "{err}");
    // Progress for 60 s against a bound of 10 x 0.5 s: given up at the bound.
    let started = std::time::Instant::now();
    let (code, _, err) = call(
        &url,
        "work",
        r#"{"seconds": 60, "every": 0.1}"#,
        &["--timeout-ms", "500"],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("tools/call (at its call_max bound) timed out after 5s"),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "the bound held: {:?}",
        started.elapsed()
    );
}

/// A server's log notifications reach the node's log: at most 50 lines a
/// second, the rest counted, and a secret the node sent never written out.
#[test]
fn server_log_lines_are_bounded_and_redacted() {
    let old = python1_peer();
    let new = python2_peer();
    for url in [old.url("/mcp"), new.url("/mcp")] {
        let (code, _, err) = call(&url, "chatter", r#"{"lines": 3, "text": "hello"}"#, &[]);
        assert_eq!(code, 0, "{err}");
        for i in 0..3 {
            assert!(
                err.contains(&format!("server log: hello #{i}")),
                "{url}: {err}"
            );
        }
        let (code, _, err) = call(&url, "chatter", r#"{"lines": 400, "text": "flood"}"#, &[]);
        assert_eq!(code, 0, "{err}");
        let written = err.matches("server log: flood").count();
        assert!(written <= 100, "{written} lines written of 400");
        assert!(
            err.contains("server logging is flooding; lines were dropped"),
            "{err}"
        );
    }
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--url",
            &old.url("/mcp"),
            "--header",
            "Authorization=Bearer ${PEER_TOKEN}",
            "--tool",
            "log_authorization",
        ],
        &[("PEER_TOKEN", "s3cret-peer-token")],
    );
    assert_eq!((code, out.lines().next()), (0, Some("logged")), "{err}");
    assert!(
        err.contains("called with authorization Bearer <redacted>"),
        "{err}"
    );
    assert!(!err.contains("s3cret-peer-token"), "{err}");
}

/// A server that pings the node in the middle of a call gets its answer.
#[test]
fn pings_from_a_server_are_answered() {
    let peer = python1_peer();
    let (code, out, err) = call(&peer.url("/mcp"), "ping_client", "{}", &[]);
    assert_eq!(
        (code, out.lines().next()),
        (0, Some("pong received")),
        "{err}"
    );
}

/// The names in `server`'s catalog, as a node would offer them.
/// The Python SDK 2.x server, its tool lists carrying `ttlMs` `ttl_ms`.
fn python2_peer_with_ttl(ttl_ms: &str) -> HttpPeer {
    let port = free_port();
    let mut cmd = Command::new(python_sdk2());
    cmd.arg(python2_http_server())
        .arg(port.to_string())
        .arg(ttl_ms);
    HttpPeer::start("python sdk 2.x server", cmd, port)
}

/// `peer` as server `py2`.
fn py2_spec(peer: &HttpPeer) -> ServerSpec {
    ServerSpec {
        id: "py2".into(),
        transport: Transport::StreamableHttp as i32,
        url: peer.url("/mcp"),
        enabled: true,
        ..Default::default()
    }
}

/// A node's connections with `peer` as server `py2`.
fn connections_to(peer: &HttpPeer) -> Connections {
    let registry = RegistryHandle::new(RegistryView::from_specs([py2_spec(peer)]));
    Connections::new(registry, Arc::new(|_: &str| Ok(None)))
}

async fn catalog_names(connections: &Connections, server: &str) -> Vec<String> {
    let catalog = connections
        .catalog(server)
        .await
        .unwrap_or_else(|e| panic!("catalog: {e}"));
    catalog.tools.iter().map(|t| t.name.to_string()).collect()
}

#[test]
fn tool_lists_are_kept_as_long_as_the_server_says_and_come_sorted() {
    // ttlMs 0: stale at once, so a tool the server added unannounced is
    // seen at the next use; an hour: the node keeps its list.
    for (ttl_ms, seen) in [("0", true), ("3600000", false)] {
        let peer = python2_peer_with_ttl(ttl_ms);
        spear_tests::runtime().block_on(async {
            let connections = connections_to(&peer);
            let before = catalog_names(&connections, "py2").await;
            let mut sorted = before.clone();
            sorted.sort();
            assert_eq!(before, sorted, "offered in name order");
            let args = serde_json::json!({"name": "aardvark"});
            let grown = connections
                .call("py2", "grow", args.as_object().cloned())
                .await
                .unwrap_or_else(|e| panic!("grow: {e}"));
            assert!(!grown.is_error, "{grown:?}");
            let after = catalog_names(&connections, "py2").await;
            assert_eq!(
                after.contains(&"aardvark".to_string()),
                seen,
                "ttlMs {ttl_ms}: {after:?}"
            );
            if seen {
                assert_eq!(
                    after[0], "aardvark",
                    "sorted, not in the server's order: {after:?}"
                );
            }
            connections.shutdown().await;
        });
    }
}

/// At 2026-07-28 a server announces a changed tool list only on a
/// `subscriptions/listen` stream the client opened: the node opens one,
/// and the announcement bumps the counter its catalog re-lists on (the
/// list's `ttlMs`, an hour, would otherwise keep the old one).
#[test]
fn a_2026_07_28_announcement_reaches_the_node_through_its_listen_stream() {
    let peer = python2_peer_with_ttl("3600000");
    let spec = py2_spec(&peer);
    let lookup = |_: &str| -> Result<Option<String>, spearlet::node_policy::Refused> { Ok(None) };
    spear_tests::runtime().block_on(async {
        let client = McpClient::connect(&spec, &lookup, SessionOptions::default())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let timeouts = Timeouts::for_spec(&spec);
        let listed = |list: ToolList| list.tools.iter().any(|t| t.name == "zebra");
        let before = client.list_tools(10, timeouts.list_tools).await;
        assert!(
            !before.map(listed).unwrap_or(true),
            "zebra before it was added"
        );
        let mut changed = client.tools_changed();
        changed.mark_unchanged();
        let args = serde_json::json!({"name": "zebra"});
        let grown = client
            .call_tool("grow_announced", args.as_object().cloned(), timeouts)
            .await
            .unwrap_or_else(|e| panic!("grow_announced: {e}"));
        assert_ne!(grown.is_error, Some(true), "{grown:?}");
        // The announcement itself, as it arrives on the listen stream.
        tokio::time::timeout(std::time::Duration::from_secs(20), changed.changed())
            .await
            .unwrap_or_else(|_| panic!("no tools/list_changed reached the node"))
            .unwrap_or_else(|e| panic!("{e}"));
        let after = client.list_tools(10, timeouts.list_tools).await;
        assert!(
            after.map(listed).unwrap_or(false),
            "zebra not listed after it was announced"
        );
        client.shutdown().await;
    });
}
