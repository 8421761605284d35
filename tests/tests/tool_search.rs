//! Tool search through a real guest on a real node: nine MCP servers of
//! twenty tools each (`peers/catalog_server.py`, Python SDK) declared in
//! SMS's MCP dir, and the `search-agent` guest, which turns
//! `mcp.tool_search` on with `cchat_ctl_set_param`, denies every tool that
//! deletes, and runs the model's calls itself (`cchat_call_tool`),
//! searches included. The model (replay-llm, OpenAI wire format) searches,
//! tries tools it has not obtained and a denied one, then calls what it
//! found.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::python_sdk;
use spear_tests::tasks::{cluster_opts, guest, register, ClusterOptions};
use spear_tests::wait::eventually;
use spearlet::tools::{offered_name, SEARCH_TOOL};

const SERVERS: [&str; 9] = [
    "files", "git", "tracker", "chat", "calendar", "database", "cloud", "browser", "mail",
];

fn write(path: &std::path::Path, value: &Value) {
    std::fs::write(path, value.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

#[test]
fn a_guest_searches_its_tools_and_calls_only_what_it_found_and_may_use() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let model = work.path().join("model.json");
    let git_log = offered_name("git", "git_log");
    write(
        &model,
        &json!({"turns": [
            {"role": "assistant", "content": null, "tool_calls": [
                call("call_search", SEARCH_TOOL, json!({"query": "commit history log"})),
                call("call_early", &git_log, json!({"repo_path": "/srv/app"})),
                call("call_delete", &offered_name("files", "delete_file"), json!({"path": "/etc/passwd"})),
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                call("call_wipe", SEARCH_TOOL, json!({"query": "delete remove file", "limit": 10})),
                call("call_log", &git_log, json!({"repo_path": "/srv/app; $(reboot)"})),
            ]},
            {"role": "assistant", "content": "history: {{tool_result:call_log}}"},
        ]}),
    );
    let c = cluster_opts(
        "unused",
        ClusterOptions {
            models: vec![("search", model)],
            ..Default::default()
        },
    );
    let script = spear_tests::tasks::repo_file("tests/peers/catalog_server.py");
    for id in SERVERS {
        write(
            &c.work.path().join(format!("mcp.d/{id}.json")),
            &json!({"id": id, "command": python_sdk(), "args": [script, id]}),
        );
    }
    eventually(
        "the nine servers on the node",
        Duration::from_secs(30),
        || {
            let persisted = c.node.persisted_servers();
            (persisted.len() >= SERVERS.len())
                .then_some(())
                .ok_or(format!("{persisted:?}"))
        },
    );
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": SERVERS, "default_server_ids": SERVERS},
                      "llm": {"backend": "search"}, "limits": {"wall_ms": 120000}});
    let (code, _, err) = register(&c, "search", &guest("search-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, run, err) = c.sms.client(&["invoke", "search"]);
    assert_eq!(code, 0, "{run}{err}");

    // The search found git_log first; the denied tool is in no search.
    let searched: Vec<&str> = run.lines().filter(|l| l.starts_with("searched")).collect();
    assert_eq!(searched.len(), 2, "{run}");
    assert!(searched[0].contains("found git/git_log"), "{}", searched[0]);
    assert!(searched.iter().all(|l| !l.contains("delete_file")), "{run}");
    assert!(
        searched[1].contains("found "),
        "the second search found nothing: {run}"
    );
    // Called before the search's answer was seen: not offered. The denied
    // tool: not offered either.
    let refused: Vec<&str> = run.lines().filter(|l| l.starts_with("refused")).collect();
    assert_eq!(refused.len(), 2, "{run}");
    assert!(
        refused
            .iter()
            .any(|l| l.contains(&git_log) && l.contains("was not offered")),
        "{run}"
    );
    assert!(
        refused
            .iter()
            .any(|l| l.contains(&offered_name("files", "delete_file"))),
        "{run}"
    );
    // Then it ran, with its argument as written.
    assert!(run.contains("ran git/git_log"), "{run}");
    assert!(
        run.contains(r#"history: git/git_log ran with {"repo_path": "/srv/app; $(reboot)"}"#),
        "{run}"
    );
    // The audit trail, once the node shipped it: git_log ran once, and
    // the call of the denied tool is recorded as refused.
    let records = eventually(
        "the run's audit records on SMS",
        Duration::from_secs(30),
        || {
            let (_, audit, _) = c.sms.client(&["audit", "--json"]);
            let records: Vec<Value> = audit
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            records
                .iter()
                .any(|r| r["tool"] == "git_log" && r["outcome"] == "run")
                .then_some(records.clone())
                .ok_or(audit)
        },
    );
    let count = |tool: &str, outcome: &str| {
        records
            .iter()
            .filter(|r| r["tool"] == tool && r["outcome"] == outcome)
            .count()
    };
    assert_eq!(count("git_log", "run"), 1, "{records:?}");
    assert_eq!(count("delete_file", "run"), 0, "{records:?}");
}
