//! Fleet quotas on the real binaries: one SMS and two nodes. A task quota
//! of 3 tool calls a minute holds across both nodes (the others get the
//! sentence naming the quota, its limit and when it refills, and `sms
//! usage` counts exactly the calls that ran); a second task is unaffected;
//! a token quota ends a run with stop reason `quota`; a server file's
//! quota on one tool holds for every task; a bad quota is one sentence.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::audit_trail::audit;
use spear_tests::tasks::{
    calling_once, cluster_opts, guest, register, second_node, Cluster, ClusterOptions,
};
use spear_tests::wait::eventually;

use spear_tests::tasks::{quota_task as task, PRICED_MODEL as PRICES};

/// A cluster whose `once` model calls the filesystem server's
/// `list_allowed_directories` once, then answers; its model is priced.
fn quota_cluster(notes: &str) -> (Cluster, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let model = calling_once(dir.path(), "fs", "list_allowed_directories");
    let c = cluster_opts(
        notes,
        ClusterOptions {
            node_toml: PRICES,
            models: vec![("once", model)],
            ..Default::default()
        },
    );
    (c, dir)
}

fn invoke(c: &Cluster, task: &str, node: &str) -> Value {
    let (_, out, err) = c.sms.client(&["invoke", "--json", "--node", node, task]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"))
}

/// Whether the run's one call reached the server (the model repeats what
/// the tool answered: the allowed directory, or the refusal).
fn ran(run: &Value) -> bool {
    run["usage"]["tool_calls"] == 1
}

fn minute() -> u64 {
    spear_common::clock::now_ms() / 60_000
}

#[test]
fn a_task_quota_holds_across_nodes_and_usage_counts_what_ran() {
    let (c, _dir) = quota_cluster("quota'd notes");
    let _b = second_node(&c);
    let quota = json!({"tool_calls": {"max": 3, "per": "1m"}});
    for name in ["notes", "other"] {
        let (code, _, err) = register(&c, name, &guest("fs-agent"), &task(quota.clone()), &[]);
        assert_eq!(code, 0, "{err}");
    }
    let first_minute = minute();
    let runs: Vec<Value> = (0..8)
        .map(|i| invoke(&c, "notes", if i % 2 == 0 { "node-a" } else { "node-b" }))
        .collect();
    let minutes = minute() - first_minute + 1;
    let accepted = runs.iter().filter(|r| ran(r)).count() as u64;
    if minutes == 1 {
        assert_eq!(accepted, 3, "{runs:#?}");
    } else {
        // The runs crossed into the next window, which refills.
        assert!(accepted <= 3 * minutes, "{runs:#?}");
    }
    let refused: Vec<&Value> = runs.iter().filter(|r| !ran(r)).collect();
    assert!(!refused.is_empty());
    for run in &refused {
        let out = run["stdout"].as_str().unwrap();
        assert!(
            out.contains("task 'notes' has used its quota of 3 tool calls per 1m (quota.tool_calls); it refills at ")
                && out.contains(" UTC, in "),
            "the model read why: {run:#}"
        );
        assert_eq!(
            run["exit_code"], 0,
            "a refused call is a tool result: {run:#}"
        );
        assert!(
            run["trace"][0]["refused"]
                .as_str()
                .unwrap()
                .contains("has used its quota"),
            "{run:#}"
        );
    }
    // Both nodes' runs were refused once the window was spent: the quota
    // is the fleet's, not each node's.
    let nodes: std::collections::BTreeSet<&str> = refused
        .iter()
        .map(|r| r["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 2, "{refused:#?}");

    // A second task's quota is its own.
    let other = invoke(&c, "other", "node-b");
    assert!(ran(&other), "{other:#}");

    // `sms usage` counts exactly the calls that ran, from the records the
    // nodes shipped, and each refusal is a record of its own.
    let usage = eventually("the runs' records at SMS", Duration::from_secs(20), || {
        let (code, out, err) = c.sms.client(&["usage", "--json", "--task", "notes"]);
        assert_eq!(code, 0, "{err}");
        let usage: Value = serde_json::from_str(&out).unwrap();
        (usage["runs"] == 8).then_some(usage.clone()).ok_or(out)
    });
    assert_eq!(usage["tool_calls"], accepted, "{usage}");
    let records = audit(&c, &["--task", "notes", "--outcome", "quota"]);
    assert_eq!(records.len() as u64, 8 - accepted, "{records:#?}");
    assert!(records[0]["rule"]
        .as_str()
        .unwrap()
        .contains("quota.tool_calls"));

    // The nodes' metrics say how many calls the quota refused.
    let metrics = spear_tests::http::get(&c.node.http, "/metrics").unwrap();
    assert!(
        metrics.contains("spearlet_quota_refusals_total{reason=\"spent\"}"),
        "{metrics}"
    );
}

#[test]
fn a_token_quota_ends_the_run_with_stop_reason_quota() {
    let (c, _dir) = quota_cluster("token-bound notes");
    // Each request is 15 tokens: the first run's two requests spend the
    // hour's 20, so the next run's first request is not made.
    let quota = json!({"model_tokens": {"max": 20, "per": "1h"}});
    let (code, _, err) = register(&c, "chatty", &guest("fs-agent"), &task(quota), &[]);
    assert_eq!(code, 0, "{err}");
    let first = invoke(&c, "chatty", "node-a");
    assert_eq!(first["exit_code"], 0, "{first:#}");
    let second = invoke(&c, "chatty", "node-a");
    assert_eq!(second["stop_reason"], "quota", "{second:#}");
    assert_eq!(second["exit_code"], Value::Null, "{second:#}");
    assert!(
        second["error"].as_str().unwrap().contains(
            "task 'chatty' has used its quota of 20 model tokens per 1h (quota.model_tokens)"
        ),
        "{second:#}"
    );
    assert_eq!(second["usage"]["model_requests"], 0, "{second:#}");
    // What people read.
    let (code, _, err) = c.sms.client(&["invoke", "--node", "node-a", "chatty"]);
    assert_eq!(code, 1);
    assert!(err.contains("stopped by a quota: "), "{err}");
}

#[test]
fn a_server_quota_on_one_tool_holds_for_every_task_and_bad_ones_are_named() {
    let (c, _dir) = quota_cluster("capped notes");
    let mcp_dir = c.work.path().join("mcp.d");
    // The operator adds a quota to the filesystem server's file.
    let fs = json!({"mcpServers": {"fs": {
        "command": spear_tests::peers::npm_bin("mcp-server-filesystem"), "args": [c.files],
        "allowed_tools": ["read_*", "list_*"],
        "quota": {"tools": {"list_allowed_directories": {"max": 2, "per": "1h"}}},
    }}});
    std::fs::write(mcp_dir.join("fs.json"), fs.to_string()).unwrap();
    // A bad quota: the file is refused with the key named, nothing else lost.
    let bad = json!({"id": "bad", "command": "/bin/true", "quota": {"calls": {"max": 5, "per": "1 week"}}});
    std::fs::write(mcp_dir.join("bad.json"), bad.to_string()).unwrap();
    let problems = eventually("the files to be read", Duration::from_secs(20), || {
        let status = c.sms.status();
        let capped = status["revision"] == 2;
        let said = status["file_problems"].to_string();
        (capped && said.contains("quota.calls.per is '1 week'"))
            .then_some(said)
            .ok_or(status.to_string())
    });
    assert!(problems.contains("bad.json"), "{problems}");
    eventually(
        "the node to have the quota",
        Duration::from_secs(20),
        || {
            let registry = c.node.registry()?;
            let quota = &registry["servers"][0]["spec"]["quota"];
            (quota["tools"]["list_allowed_directories"] == json!({"max": 2, "per": "1h"}))
                .then_some(())
                .ok_or(registry.to_string())
        },
    );
    for name in ["one", "two"] {
        let (code, _, err) = register(&c, name, &guest("fs-agent"), &task(Value::Null), &[]);
        assert_eq!(code, 0, "{err}");
    }
    let runs: Vec<Value> = ["one", "two", "one", "two"]
        .iter()
        .map(|t| invoke(&c, t, "node-a"))
        .collect();
    let accepted = runs.iter().filter(|r| ran(r)).count();
    assert_eq!(accepted, 2, "{runs:#?}");
    let last = runs[3]["stdout"].as_str().unwrap();
    assert!(
        last.contains("tool 'list_allowed_directories' of server 'fs' has used its quota of 2 tool calls per 1h (the server file's quota.tools)"),
        "{last}"
    );
}
