//! `spearlet explain` answers "the model says it has no tools" with the layer
//! that caused it, on a real node synced from a real SMS, connecting to real
//! servers.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::fixtures::write_file;
use spear_tests::peers::misbehaving_server;
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

fn server_file(dir: &Path, id: &str, extra: Value) {
    let mut spec = json!({"id": id, "command": "python3", "args": [misbehaving_server()]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    write_file(dir, &format!("{id}.json"), &spec.to_string());
}

fn explain(state_dir: &Path, task: &Value, sets: &[&str]) -> Value {
    let work = tempfile::tempdir().unwrap();
    let task_file = work.path().join("task.json");
    std::fs::write(&task_file, task.to_string()).unwrap();
    let mut cmd = Command::new(bin("spearlet"));
    cmd.arg("explain")
        .arg("--json")
        .arg("--task")
        .arg(&task_file)
        .arg("--state-dir")
        .arg(state_dir);
    for set in sets {
        cmd.arg("--set").arg(set);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn server<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server_id"] == id)
        .unwrap_or_else(|| panic!("{id} missing: {report}"))
}

fn tool<'a>(report: &'a Value, id: &str, name: &str) -> &'a Value {
    server(report, id)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == name)
        .unwrap_or_else(|| panic!("{id}/{name} missing"))
}

fn layer(verdict: &Value) -> (bool, &str) {
    (
        verdict["offered"].as_bool().unwrap(),
        verdict["layer"].as_str().unwrap(),
    )
}

#[test]
fn explain_names_the_layer_behind_every_missing_tool() {
    let dir = tempfile::tempdir().unwrap();
    server_file(dir.path(), "mb", json!({}));
    server_file(dir.path(), "empty", json!({"allowed_tools": []}));
    server_file(dir.path(), "web", json!({}));
    write_file(
        dir.path(),
        "broken.json",
        &json!({"id": "broken", "command": "/nonexistent/spear-no-such-binary"}).to_string(),
    );
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node_dir = state.path().join("n1");
    let node = SpearletProc::start("n1", &sms.grpc, &node_dir);
    eventually(
        "the node to persist 4 servers",
        Duration::from_secs(10),
        || match node.persisted_servers() {
            ids if ids.len() == 4 => Ok(()),
            ids => Err(format!("{ids:?}")),
        },
    );

    let task = json!({"mcp": {
        "enabled": true,
        "allowed_server_ids": ["mb", "empty", "broken", "ghost"],
        "default_server_ids": ["mb", "empty", "broken"],
        "task_tool_denylist": ["huge"],
    }});
    let report = explain(
        &node_dir,
        &task,
        &[
            r#"mcp.tool_denylist=["ok"]"#,
            r#"mcp.server_ids=["mb","empty","broken","web"]"#,
        ],
    );

    // A refused write is reported, and changed nothing.
    let refused = report["refused_writes"].to_string();
    assert!(
        refused.contains("web") && refused.contains("permission denied"),
        "{refused}"
    );
    assert_eq!(layer(&server(&report, "mb")["verdict"]), (true, "server"));
    assert_eq!(
        layer(&tool(&report, "mb", "crash")["verdict"]),
        (true, "server")
    );
    // Task deny, session deny.
    assert_eq!(
        layer(&tool(&report, "mb", "huge")["verdict"]),
        (false, "task")
    );
    assert_eq!(
        layer(&tool(&report, "mb", "ok")["verdict"]),
        (false, "session")
    );
    // A quarantined tool.
    assert_eq!(
        layer(&tool(&report, "mb", "bad_schema")["verdict"]),
        (false, "health")
    );
    // An empty allow list.
    let empty = tool(&report, "empty", "crash");
    assert_eq!(layer(&empty["verdict"]), (false, "server"));
    assert!(empty["verdict"]["rule"].as_str().unwrap().contains("empty"));
    // A failing server.
    let broken = &server(&report, "broken")["verdict"];
    assert_eq!(layer(broken), (false, "health"));
    assert!(
        broken["rule"]
            .as_str()
            .unwrap()
            .contains("spear-no-such-binary"),
        "{broken}"
    );
    // A server the task does not allow.
    assert_eq!(layer(&server(&report, "web")["verdict"]), (false, "task"));

    // A server unknown to the registry, and one not in the session's server_ids.
    let report = explain(&node_dir, &task, &[r#"mcp.server_ids=["ghost"]"#]);
    assert_eq!(
        layer(&server(&report, "ghost")["verdict"]),
        (false, "registry")
    );
    assert_eq!(layer(&server(&report, "mb")["verdict"]), (false, "session"));

    // MCP disabled by the session, then by the task.
    let report = explain(&node_dir, &task, &["mcp.enabled=false"]);
    assert_eq!(layer(&server(&report, "mb")["verdict"]), (false, "session"));
    let off = json!({"mcp": {"enabled": false, "allowed_server_ids": ["mb"], "default_server_ids": ["mb"]}});
    let report = explain(&node_dir, &off, &["mcp.enabled=true"]);
    assert_eq!(layer(&server(&report, "mb")["verdict"]), (false, "task"));
    assert!(report["refused_writes"]
        .to_string()
        .contains("does not allow MCP"));
}
