//! Contain what the node runs (issue 37), on the real `sms` and
//! `spearlet`: a hostile stdio server started by a node with the default
//! sandbox, next to a sibling holding a secret, tries each escape (the
//! node's and the sibling's environment, the node's config and state, SMS's
//! port, signalling the node, 300 processes, a new user namespace); every
//! attempt fails while writing its own scratch home and reaching the one
//! destination it declares work, and the ordinary filesystem server keeps
//! serving the fs-agent.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::python_sdk;
use spear_tests::tasks::{cluster_opts, guest, register, repo_file, ClusterOptions};
use spearlet::tools::offered_name;

const SIBLING_SECRET: &str = "sibling-s3cret-sandbox-8r";
const MODEL_KEY: &str = "sk-test-never-logged";

fn hostile(targets: &[(&str, String)]) -> Value {
    let mut env = serde_json::Map::new();
    for (name, value) in targets {
        env.insert((*name).to_string(), json!(value));
    }
    json!({"command": python_sdk(), "args": [repo_file("tests/peers/hostile_server.py")],
           "env": env, "pin": "off"})
}

#[test]
fn a_hostile_server_escapes_nothing_and_the_others_keep_serving() {
    std::env::set_var("SPEAR_TEST_GUEST_SIBLING_SECRET", SIBLING_SECRET);
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let model = work.path().join("model.json");
    let call = |server: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{server}"), "type": "function",
               "function": {"name": offered_name(server, "escape"), "arguments": "{}"}}]})
    };
    let turns = json!({"turns": [call("sibling"), call("hostile"),
        {"role": "assistant", "content": "escapes: {{last_tool_result}}"}]});
    std::fs::write(&model, turns.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let c = cluster_opts(
        "the launch code is 7-7-alpha",
        ClusterOptions {
            models: vec![("hostile", model)],
            ..Default::default()
        },
    );
    let node_pid = c.node.proc.pid().unwrap_or_else(|| panic!("the node runs"));
    let state = c.node.state_dir.display().to_string();
    let config = c.work.path().join("node.toml").display().to_string();
    let sms_port = c
        .sms
        .grpc
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    // The one destination the hostile server declares: a listener here,
    // reached through the node's forwarder (policy.egress allows loopback).
    let destination = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let allowed_port = destination
        .local_addr()
        .map(|a| a.port())
        .unwrap_or_default();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&accepted);
    std::thread::spawn(move || {
        for conn in destination.incoming() {
            if conn.is_ok() {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let targets = [
        ("HOSTILE_SECRETS", format!("{SIBLING_SECRET},{MODEL_KEY}")),
        (
            "HOSTILE_READ",
            format!("{config},{state}/registry.json,/etc/shadow,/root/.bash_history"),
        ),
        ("HOSTILE_STATE_DIR", state.clone()),
        ("HOSTILE_PORTS", sms_port),
        ("HOSTILE_NODE_PID", node_pid.to_string()),
        ("HOSTILE_ALLOWED_PORT", allowed_port.to_string()),
    ];
    let mut sibling = hostile(&[]);
    sibling["env"]["SIBLING_TOKEN"] = json!("${SPEAR_TEST_GUEST_SIBLING_SECRET}");
    let mut hostile_server = hostile(&targets);
    hostile_server["sandbox"] = json!({"connect": [format!("127.0.0.1:{allowed_port}")]});
    let servers = json!({"mcpServers": {"hostile": hostile_server, "sibling": sibling}});
    let mcp_dir = c.work.path().join("mcp.d");
    std::fs::write(mcp_dir.join("hostile.json"), servers.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    spear_tests::wait::eventually("the servers on the node", Duration::from_secs(30), || {
        let persisted = c.node.persisted_servers();
        (persisted.iter().any(|s| s == "hostile") && persisted.iter().any(|s| s == "sibling"))
            .then_some(())
            .ok_or(format!("{persisted:?}"))
    });

    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["hostile", "sibling"],
                              "default_server_ids": ["hostile", "sibling"]},
                      "llm": {"backend": "hostile"}, "limits": {"wall_ms": 120000}});
    let (code, _, err) = register(&c, "hostile", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, run, err) = c.sms.client(&["invoke", "hostile"]);
    assert_eq!(code, 0, "{run}{err}");
    let line = run
        .lines()
        .find_map(|l| l.strip_prefix("escapes: "))
        .unwrap_or_else(|| panic!("no report in the run: {run}"));
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {run}"));
    let report = report.as_object().unwrap_or_else(|| panic!("{run}"));
    assert!(report.len() >= 10, "every attempt answered: {report:?}");
    for (attempt, got) in report {
        let got = got.as_str().unwrap_or_default();
        if attempt == "write the home it was given"
            || attempt == "connect to its declared destination"
        {
            assert!(got.starts_with("DONE"), "{attempt}: {got}");
        } else {
            assert!(got.starts_with("blocked"), "{attempt}: {got}");
        }
    }
    assert!(
        report.contains_key("connect to its declared destination"),
        "{report:?}"
    );
    assert!(
        accepted.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the destination saw no connection"
    );
    assert!(!c.node.state_dir.join("planted-by-hostile").exists());
    // The node says how the servers were confined, and the ordinary
    // filesystem server still serves the fs-agent.
    assert!(
        c.node.proc.log().contains("confined:"),
        "no sandbox line in the node's log"
    );
    let fs = spear_tests::tasks::fs_task();
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = c.sms.client(&["invoke", "fs-agent"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("7-7-alpha"), "{out}");
}
