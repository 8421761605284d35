//! Remote servers that cannot flood, stall or point a node elsewhere (issue
//! 54, item 6), on the real `sms` and `spearlet` with a hostile HTTP MCP
//! server of our own (tests/peers/hostile_remote.py) beside the ordinary
//! filesystem server:
//!
//! - over Streamable HTTP, a call answered with an endless event stream is
//!   cut off at the node's bound (10,000 events on one response stream) and
//!   the stream closed; a 1 MiB header, 10,000 headers and a gzip bomb are
//!   errors (never a result holding their bytes); a body sent a byte every
//!   two seconds times out; the server's next call and the filesystem
//!   server still answer, in the same run;
//! - over the legacy HTTP+SSE transport, a stream that floods without ever
//!   answering `initialize` is given up on at the same bound;
//! - a server whose Protected Resource Metadata names an authorization
//!   server at an internal address (a canary listener on 127.0.0.3, standing
//!   in for etcd or a metadata endpoint) gets SMS's OAuth client nowhere:
//!   SMS's egress guard refuses the address and the canary is never reached.
//!
//! In each, the node's resident memory stays within 64 MiB of where it was.

#[path = "remote_hostile/support.rs"]
mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use spear_tests::procs::bin;
use spear_tests::wait::eventually;
use support::*;

#[test]
fn a_hostile_remote_server_is_bounded_and_the_others_serve() {
    let peer = Peer::start(&[], false);
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let calls: [Call<'_>; 7] = [
        ("call_flood", "hostile", "flood_events", "{}"),
        ("call_huge", "hostile", "huge_header", "{}"),
        ("call_many", "hostile", "many_headers", "{}"),
        ("call_slow", "hostile", "slow_body", "{}"),
        ("call_gzip", "hostile", "gzip_bomb", "{}"),
        ("call_echo", "hostile", "echo", r#"{"text": "still here"}"#),
        ("call_fs", "fs", "list_allowed_directories", "{}"),
    ];
    let hostile = json!({"url": peer.url("/mcp"), "pin": "off",
                         "timeouts_ms": {"call": 4000, "call_max": 8000}});
    let c = cluster_with(
        work.path(),
        json!({ "hostile": hostile }),
        recording(work.path(), "hostile", &calls),
        vec![],
    );
    let pid = c.node.proc.pid().unwrap_or_else(|| panic!("the node runs"));
    let baseline = warm_baseline(&c, pid);

    let ((code, out, err), peak) = with_peak_rss(pid, || invoke(&c, "hostile"));
    assert_eq!(code, 0, "the run did not end well: {out}{err}");
    let result = |id: &str| section(&out, id);
    let (flood, huge, many, slow, gzip, echo, fs) = (
        result("call_flood"),
        result("call_huge"),
        result("call_many"),
        result("call_slow"),
        result("call_gzip"),
        result("call_echo"),
        result("call_fs"),
    );
    eprintln!(
        "flood: {flood}\nhuge_header: {huge}\nmany_headers: {many}\nslow_body: {slow}\ngzip_bomb: {gzip}\necho: {echo}"
    );

    assert!(
        fs.contains(&c.files.display().to_string()),
        "the filesystem server stopped serving: {fs}"
    );
    // A hostile call does not take its own server's later calls with it.
    assert!(
        echo.contains("echo: still here"),
        "the hostile server's own echo failed after its hostile calls: {echo}; status: {}",
        server_status(&c, "hostile")
    );
    // The call's error says its answer was cut; the node's log says why.
    assert!(
        failed(&flood, "hostile", "flood_events") && flood.contains(ANSWER_CUT),
        "the flood was not cut off at the node's bound: {flood}"
    );
    let said = c.node.proc.log();
    assert!(
        said.contains(&format!("{EVENTS_BOUND} on one response stream")),
        "the node's log does not say the stream passed its bound"
    );
    let lower = slow.to_lowercase();
    assert!(
        failed(&slow, "hostile", "slow_body")
            && (lower.contains("timed out") || lower.contains("timeout")),
        "the slow body did not time out: {slow}"
    );
    assert!(
        !slow.contains("slow body done"),
        "the slow body was waited for: {slow}"
    );
    for (tool, text) in [
        ("huge_header", &huge),
        ("many_headers", &many),
        ("gzip_bomb", &gzip),
    ] {
        assert!(
            failed(text, "hostile", tool),
            "{tool} is not an error: {text}"
        );
        assert!(
            !text.contains("you should never see this"),
            "{tool}'s body got through: {text}"
        );
    }
    assert!(
        !huge.contains(&"a".repeat(64)),
        "the X-Huge value got through: {} bytes: {}",
        huge.len(),
        spear_common::text::prefix(&huge, 300)
    );
    assert!(
        !gzip.contains(&"0".repeat(64)) && !gzip.contains('\u{fffd}'),
        "the gzip bomb's bytes got through ({} bytes): {}",
        gzip.len(),
        spear_common::text::prefix(&gzip, 300)
    );
    assert_memory_bounded(baseline, peak);

    // The node closed the flood (and the slow body): the peer stopped.
    let sent = peer.assert_stream_closed("flood_events", "flood_events_sent");
    assert!(
        sent > EVENTS_BOUND_COUNT,
        "the peer sent only {sent} events: {}",
        peer.stats()
    );
    eventually(
        "the node to close the slow body",
        Duration::from_secs(15),
        || {
            let stats = peer.stats();
            (stats["open_streams"]["slow_body"] == 0)
                .then_some(())
                .ok_or(stats.to_string())
        },
    );
}

#[test]
fn a_legacy_sse_server_flooding_its_stream_is_cut_off() {
    let peer = Peer::start(&[], false);
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let flood = json!({"url": peer.url("/sse"), "transport": "sse", "pin": "off",
                       "timeouts_ms": {"startup": 10000, "list_tools": 10000}});
    let c = cluster_with(
        work.path(),
        json!({ "flood_sse": flood }),
        recording(
            work.path(),
            "hostile",
            &[("call_fs", "fs", "list_allowed_directories", "{}")],
        ),
        vec![],
    );
    let pid = c.node.proc.pid().unwrap_or_else(|| panic!("the node runs"));
    let baseline = warm_baseline(&c, pid);

    // The run connects both of its servers: the flood, and fs beside it.
    let ((code, out, err), peak) = with_peak_rss(pid, || invoke(&c, "hostile"));
    assert_eq!(code, 0, "the run did not end well: {out}{err}");
    let fs = section(&out, "call_fs");
    assert!(
        fs.contains(&c.files.display().to_string()),
        "the filesystem server stopped serving: {fs}"
    );
    let why = eventually(
        "the node to give up on the flooding SSE server",
        Duration::from_secs(30),
        || {
            let server = server_status(&c, "flood_sse");
            let last_error = server["last_error"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let logged = c
                .node
                .proc
                .log()
                .lines()
                .find(|l| l.contains(EVENTS_BOUND))
                .map(str::to_string);
            match (last_error.contains(EVENTS_BOUND), logged) {
                (true, _) => Ok(last_error),
                (false, Some(line)) => Ok(line),
                (false, None) => Err(format!("status: {server}; stats: {}", peer.stats())),
            }
        },
    );
    eprintln!("the node said: {why}");
    assert_memory_bounded(baseline, peak);
    let sent = peer.assert_stream_closed("sse", "sse_events_sent");
    assert!(
        sent > EVENTS_BOUND_COUNT,
        "the peer sent only {sent} events: {}",
        peer.stats()
    );

    // And the node still serves: another run, fs answering.
    let (code, out, err) = invoke(&c, "hostile");
    assert_eq!(code, 0, "the next run did not end well: {out}{err}");
    let fs = section(&out, "call_fs");
    assert!(
        fs.contains(&c.files.display().to_string()),
        "the filesystem server stopped serving: {fs}"
    );
}

#[test]
fn a_server_pointing_oauth_at_an_internal_address_gets_nothing() {
    let peer = Peer::start(&[("HOSTILE_AS", "http://127.0.0.3:{canary_port}/")], true);
    let canary = peer
        .canary
        .unwrap_or_else(|| panic!("the peer was started with a canary"));
    let metadata = spear_tests::http::get_json(
        &peer.addr,
        "/.well-known/oauth-protected-resource/oauth/mcp",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        metadata["authorization_servers"][0],
        format!("http://127.0.0.3:{canary}/"),
        "the metadata does not name the canary: {metadata}"
    );
    assert_eq!(peer.counter("canary_connections"), 0, "{}", peer.stats());

    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // SMS renews client-credentials tokens with the secret from its own
    // environment, and needs a key to seal what it obtains.
    std::env::set_var("HOSTILE_SECRET", HOSTILE_SECRET);
    let key = work.path().join("oauth.key");
    let out = Command::new(bin("sms"))
        .args(["oauth", "keygen"])
        .arg(&key)
        .output()
        .unwrap_or_else(|e| panic!("sms oauth keygen: {e}"));
    assert!(out.status.success(), "sms oauth keygen: {out:?}");
    let hostile = json!({"url": peer.url("/oauth/mcp"), "pin": "off",
                         "auth": {"grant": "client_credentials", "client_id": "spear",
                                  "client_secret": "${HOSTILE_SECRET}"}});
    let calls: [Call<'_>; 2] = [
        (
            "call_oauth",
            "hostile_oauth",
            "echo",
            r#"{"text": "hello"}"#,
        ),
        ("call_fs", "fs", "list_allowed_directories", "{}"),
    ];
    let c = cluster_with(
        work.path(),
        json!({ "hostile_oauth": hostile }),
        recording(work.path(), "hostile", &calls),
        vec!["--oauth-key-file".into(), key.display().to_string()],
    );
    let pid = c.node.proc.pid().unwrap_or_else(|| panic!("the node runs"));
    let baseline = warm_baseline(&c, pid);

    // Each run makes the node connect the server, for which it asks SMS
    // for a token; SMS discovers the authorization server from the
    // server's metadata and must refuse to dial it.
    let mut peak = baseline;
    let (server, said) = eventually(
        "the node to report the refused authorization server",
        Duration::from_secs(90),
        || {
            let ((code, out, err), seen) = with_peak_rss(pid, || invoke(&c, "hostile"));
            peak = peak.max(seen);
            let server = server_status(&c, "hostile_oauth");
            let last_error = server["last_error"].as_str().unwrap_or_default();
            let call = out
                .split_once("[call_oauth]\n")
                .map(|_| section(&out, "call_oauth"))
                .unwrap_or_default();
            if last_error.contains("127.0.0.3") || call.contains("127.0.0.3") {
                Ok((server.clone(), format!("{last_error}\n{call}")))
            } else {
                Err(format!(
                    "exit {code}; status: {server}; run: {out}{err}; stats: {}",
                    peer.stats()
                ))
            }
        },
    );
    eprintln!("the node said: {said}");
    assert!(
        said.contains(CANARY_REFUSED),
        "the refusal does not say why: {said}; status: {server}"
    );
    assert_eq!(server["state"], "failed", "{server}");
    let stats = peer.stats();
    assert_eq!(
        stats["canary_connections"], 0,
        "the internal address was reached: {stats}"
    );
    // The attack was made: someone read the hostile metadata.
    let read = |path: &str| {
        stats["connections"][format!("GET {path}")]
            .as_u64()
            .unwrap_or_default()
    };
    assert!(
        read("/.well-known/oauth-protected-resource/oauth/mcp")
            + read("/.well-known/oauth-protected-resource")
            > 0,
        "nobody read the server's metadata, so nothing was tried: {stats}"
    );
    assert_memory_bounded(baseline, peak);
    for (place, text) in [
        ("the node's log", c.node.proc.log()),
        ("SMS's log", c.sms.proc.log()),
        ("the node's status", server.to_string()),
    ] {
        assert!(
            !text.contains(HOSTILE_SECRET),
            "the client secret shows in {place}"
        );
    }
}
