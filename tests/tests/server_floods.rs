//! Servers that cannot flood a node (issue 54), on the real `sms` and
//! `spearlet` with a hostile stdio server of our own
//! (tests/peers/hostile_flood.py) beside the ordinary filesystem server:
//! seconds of server-to-client requests leave the node's log a few hundred
//! lines, the requests past the bound are answered with errors and
//! counted; a list of 100,000 tools is refused with its sentence and the
//! node's memory stays within 64 MiB of where it was. In both, the
//! filesystem server keeps serving the same run.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::python_sdk;
use spear_tests::procs::rss_kib;
use spear_tests::tasks::{cluster_opts, guest, register, Cluster, ClusterOptions};
use spearlet::tools::offered_name;

/// Lines the node may write while a server floods it for three seconds.
const LOG_LINES_BOUND: usize = 300;
/// How much the node's resident memory may grow over a hostile listing.
const RSS_GROWTH_BOUND_KIB: u64 = 64 * 1024;

/// A recording that calls `first` (server, tool), then the filesystem
/// server's `list_allowed_directories`, and answers with both results.
fn model(dir: &std::path::Path, first: (&str, &str)) -> std::path::PathBuf {
    let call = |id: &str, server: &str, tool: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
               "function": {"name": offered_name(server, tool), "arguments": "{}"}}]})
    };
    let turns = json!({"turns": [
        call("call_first", first.0, first.1),
        call("call_fs", "fs", "list_allowed_directories"),
        {"role": "assistant",
         "content": "first: {{tool_result:call_first}}\nfs: {{tool_result:call_fs}}"},
    ]});
    let path = dir.join("hostile-model.json");
    std::fs::write(&path, turns.to_string()).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// A cluster whose node also serves the hostile server as `hostile`, with
/// `env`, and a task `hostile` whose model is `recording`.
fn cluster_with_hostile(recording: std::path::PathBuf, env: Value) -> Cluster {
    let c = cluster_opts(
        "notes for the filesystem server",
        ClusterOptions {
            models: vec![("hostile", recording)],
            ..Default::default()
        },
    );
    let hostile = json!({"command": python_sdk(),
        "args": [concat!(env!("CARGO_MANIFEST_DIR"), "/peers/hostile_flood.py")],
        "env": env, "pin": "off"});
    let servers = json!({"mcpServers": {"hostile": hostile}});
    std::fs::write(
        c.work.path().join("mcp.d/hostile.json"),
        servers.to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    spear_tests::wait::eventually(
        "the hostile server on the node",
        Duration::from_secs(30),
        || {
            let persisted = c.node.persisted_servers();
            persisted
                .iter()
                .any(|s| s == "hostile")
                .then_some(())
                .ok_or(format!("{persisted:?}"))
        },
    );
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["hostile", "fs"],
                              "default_server_ids": ["hostile", "fs"]},
                      "llm": {"backend": "hostile"}, "limits": {"wall_ms": 120000}});
    let (code, _, err) = register(&c, "hostile", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    c
}

/// Runs the `hostile` task; returns what the filesystem server answered
/// (and all the run said after it) and what the first call did.
fn run(c: &Cluster) -> (String, String) {
    let (code, out, err) = c.sms.client(&["invoke", "hostile"]);
    assert_eq!(code, 0, "{out}{err}");
    let after = |prefix: &str| {
        out.split_once(prefix)
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_else(|| panic!("no '{prefix}' in the run: {out}"))
    };
    let first = after("first: ");
    let first = first.lines().next().unwrap_or_default().to_string();
    (after("\nfs: "), first)
}

fn metric(c: &Cluster, name: &str) -> u64 {
    let text = spear_tests::http::get(&c.node.http, "/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains("server=\"hostile\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_server_flooding_requests_leaves_the_log_bounded_and_the_others_serving() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = cluster_with_hostile(
        model(work.path(), ("hostile", "flood")),
        json!({"FLOOD_SECONDS": "3"}),
    );
    let before = c.node.proc.log().lines().count();
    let (fs, flood) = run(&c);
    let after = c.node.proc.log().lines().count();
    let written = after - before;
    let report: Value = serde_json::from_str(&flood).unwrap_or_else(|e| panic!("{e}: {flood}"));
    eprintln!("the flood: {report}; the node wrote {written} lines");
    assert!(
        fs.contains(&c.files.display().to_string()),
        "the filesystem server stopped serving: {fs}"
    );
    let sent = report["sent"].as_u64().unwrap_or_default();
    let errors = report["errors"].as_u64().unwrap_or_default();
    assert!(sent > 1000, "the server did not flood: {report}");
    assert!(
        errors > sent / 2,
        "most requests are past the bound and answered with errors: {report}"
    );
    assert!(
        written <= LOG_LINES_BOUND,
        "the node wrote {written} log lines for {sent} requests"
    );
    let refused = metric(&c, "spearlet_mcp_server_requests_refused");
    assert!(refused > 0, "the refusals are counted: {refused}");
    let log = c.node.proc.log();
    assert!(
        log.contains("server 'hostile' sent more requests than the node answers"),
        "the flood is said once"
    );
}

#[test]
fn a_list_of_100000_tools_is_refused_and_the_node_keeps_its_memory() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = cluster_with_hostile(
        model(work.path(), ("hostile", "ok")),
        json!({"HOSTILE_TOOLS": "100000"}),
    );
    let pid = c.node.proc.pid().unwrap_or_else(|| panic!("the node runs"));
    let baseline = rss_kib(pid);
    for _ in 0..2 {
        let (fs, _) = run(&c);
        let rss = rss_kib(pid);
        eprintln!("node RSS: {baseline} KiB before, {rss} KiB after a listing");
        assert!(
            rss <= baseline + RSS_GROWTH_BOUND_KIB,
            "the node grew from {baseline} to {rss} KiB"
        );
        assert!(
            fs.contains(&c.files.display().to_string()),
            "the filesystem server stopped serving: {fs}"
        );
    }
    let status = c.node.status().unwrap_or_else(|e| panic!("{e}"));
    let hostile = &status["mcp_servers"]["hostile"];
    let why = hostile["last_error"].as_str().unwrap_or_default();
    assert_eq!(hostile["state"], "failed", "{status}");
    assert!(
        why.contains("lists more than 2000 tools") && why.contains("limits.max_tools"),
        "{status}"
    );
}
