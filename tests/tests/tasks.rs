//! Tasks end to end with the real binaries: a task registered in SMS with
//! `sms tasks register`, invoked through SMS and straight on the node,
//! running example guests (built from sdk-guest for wasm32-wasip1) against
//! the real filesystem MCP server, with the model played by `replay-llm`
//! over the OpenAI wire format. Bad tasks, hostile guests and modules over
//! HTTP. Grants and node policy are in `task_grants.rs`, routing between
//! nodes in `task_routing.rs`.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use spear_tests::procs::bin;
use spear_tests::tasks::{cluster, fs_task, guest, invoke_json, register, serve_dir, sha256_of};

#[test]
fn a_registered_task_runs_on_a_node_through_sms_and_directly() {
    let c = cluster("the launch code is 7-7-alpha");
    let (code, out, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{out}{err}");

    // Listed and fetched.
    let (code, out, _) = c.sms.client(&["tasks", "list", "--json"]);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list[0]["id"], "fs-agent");
    assert_eq!(
        list[0]["config"]["mcp"]["allowed_server_ids"],
        json!(["fs"])
    );
    let (code, out, _) = c.sms.client(&["tasks", "get", "fs-agent"]);
    assert_eq!(code, 0);
    assert!(out.contains("file://"), "{out}");

    // Through SMS: the answer carries what the filesystem server read.
    let run = invoke_json(&c, &["fs-agent", "--input", "What does notes.txt say?"]);
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["node_id"], "node-a");
    let stdout = run["stdout"].as_str().unwrap();
    assert!(stdout.contains("the launch code is 7-7-alpha"), "{run}");
    assert!(stdout.contains("offline replay"), "{run}");
    let trace = run["trace"].as_array().unwrap();
    assert_eq!(trace.len(), 1, "{run}");
    assert_eq!(trace[0]["server_id"], "fs");
    assert_eq!(trace[0]["tool"], "read_text_file");
    assert_eq!(trace[0]["is_error"], false);

    // Without --json: the answer on stdout, the trace on stderr, exit 0.
    let (code, out, err) = c.sms.client(&["invoke", "fs-agent"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("7-7-alpha"), "{out}");
    assert!(err.contains("tool call fs/read_text_file: ok"), "{err}");

    // Straight to the node: it asks SMS for the task itself.
    let status = c.node.status().unwrap();
    let addr = status["invoke_addr"].as_str().unwrap().to_string();
    let run = invoke_json(&c, &["fs-agent", "--node-addr", &addr]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(run["stdout"].as_str().unwrap().contains("7-7-alpha"));

    // The same task on the node's streaming backend: tool-call deltas are
    // assembled from the SSE stream.
    let mut streamed = fs_task();
    streamed["llm"] = json!({"backend": "replay-stream"});
    let (code, _, err) = register(&c, "fs-agent-streamed", &guest("fs-agent"), &streamed, &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["fs-agent-streamed"]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["stdout"].as_str().unwrap().contains("7-7-alpha"),
        "{run}"
    );
    assert_eq!(run["trace"][0]["tool"], "read_text_file", "{run}");

    // The model key never shows up in the node's log or status.
    assert!(!c.node.proc.log().contains("sk-test-never-logged"));
    assert!(!status.to_string().contains("sk-test-never-logged"));

    // explain reads the registered task's policy.
    let out = Command::new(bin("spearlet"))
        .args([
            "explain",
            "--json",
            "--no-connect",
            "--task",
            "fs-agent",
            "--sms",
            &c.sms.grpc,
        ])
        .arg("--state-dir")
        .arg(&c.node.state_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["server_id"] == "fs")
        .cloned();
    assert_eq!(
        fs.map(|s| s["verdict"]["offered"].clone()),
        Some(json!(true)),
        "{report}"
    );
}

#[test]
fn bad_tasks_and_requests_get_one_clear_sentence_and_the_node_keeps_serving() {
    let c = cluster("still here");

    // Refused at registration, naming the mistake.
    let bad = json!({"mcp": {"enabeld": true}});
    let (code, _, err) = register(&c, "typo", &guest("fs-agent"), &bad, &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("'mcp.enabeld' (did you mean 'enabled'?)"),
        "{err}"
    );
    let wide = json!({"mcp": {"enabled": true, "default_server_ids": ["fs"]}});
    let (code, _, err) = register(&c, "wide", &guest("fs-agent"), &wide, &[]);
    assert_ne!(code, 0);
    assert!(err.contains("not in mcp.allowed_server_ids"), "{err}");

    // Unknown task.
    let (code, _, err) = c.sms.client(&["invoke", "nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("no task 'nope' is registered"), "{err}");

    // A digest that does not match the module: refused by the node.
    let wrong = "0".repeat(64);
    let (code, _, err) = register(
        &c,
        "tampered",
        &guest("fs-agent"),
        &fs_task(),
        &["--sha256", &wrong],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "tampered"]);
    assert_ne!(code, 0);
    // What the node found is not told (the node's log has it).
    let found = sha256_of(&guest("fs-agent"));
    assert!(
        err.contains("does not have the task's sha256") && !err.contains(&found),
        "{err}"
    );

    // A module that is not there.
    let missing = c.modules.join("missing.wasm");
    let uri = format!("file://{}", missing.display());
    let (code, _, err) = register(
        &c,
        "missing",
        Path::new(&uri),
        &fs_task(),
        &["--sha256", &wrong],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "missing"]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot read the module"), "{err}");

    // A backend the node does not have.
    let other = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]}, "llm": {"backend": "gpt9"}});
    let (code, _, err) = register(&c, "other-backend", &guest("fs-agent"), &other, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "other-backend"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("'gpt9'") && err.contains("replay, replay-stream"),
        "{err}"
    );

    // A guest refused by policy still returns a response: the escalation
    // example exits 0 after printing the three refusals.
    let (code, _, err) = register(&c, "escalation", &guest("escalation"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["escalation"]);
    let out = run["stdout"].as_str().unwrap_or("");
    assert_eq!(out.matches("refused (EACCES)").count(), 3, "{run}");
    assert!(!out.contains("ACCEPTED"), "{run}");
    assert!(out.contains(r#"mcp.server_ids is still ["fs"]"#), "{run}");

    // Pinned to a node that does not exist.
    let (code, _, err) = c.sms.client(&["invoke", "escalation", "--node", "node-zz"]);
    assert_ne!(code, 0);
    assert!(err.contains("node 'node-zz'"), "{err}");

    // After all that, the real task still runs.
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["fs-agent"]);
    assert!(
        run["stdout"].as_str().unwrap().contains("still here"),
        "{run}"
    );
    let _ = &c.files;
}

#[test]
fn hostile_tasks_end_with_a_reason_while_the_node_serves_a_normal_one() {
    let c = cluster("served alongside");
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    // Modules in the text format: the node compiles WAT as well as binaries.
    let hostile = [
        (
            "spin",
            r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#,
            "CPU budget",
        ),
        (
            "bomb",
            r#"(module (memory (export "memory") 1) (func (export "_start") (loop (drop (memory.grow (i32.const 256))) (br 0))))"#,
            "memory past its limit of 16 MiB (limits.memory_mb)",
        ),
        (
            "recurse",
            r#"(module (memory (export "memory") 1) (func $f (export "_start") (call $f)))"#,
            "stack",
        ),
    ];
    for (id, wat, _) in hostile {
        let path = c.modules.join(format!("{id}.wat"));
        std::fs::write(&path, wat).unwrap();
        let config = json!({"limits": {"cpu_ms": 300, "memory_mb": 16}});
        let (code, _, err) = register(&c, id, &path, &config, &[]);
        assert_eq!(code, 0, "{err}");
    }
    let runs: Vec<_> = hostile
        .iter()
        .map(|(id, _, _)| id.to_string())
        .chain(["fs-agent".to_string()])
        .map(|id| {
            let (addr, sms) = (c.sms.grpc.clone(), bin("sms"));
            std::thread::spawn(move || {
                let out = Command::new(sms)
                    .args(["invoke", "--json", &id, "--addr", &addr])
                    .env_remove("SMS_ADMIN_TOKEN")
                    .output()
                    .unwrap();
                let run: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                    panic!("{id}: {e}: {}", String::from_utf8_lossy(&out.stderr))
                });
                (id, out.status.code(), run)
            })
        })
        .collect();
    for handle in runs {
        let (id, code, run) = handle.join().unwrap();
        match hostile.iter().find(|(h, _, _)| *h == id) {
            Some((_, _, reason)) => {
                assert_eq!(code, Some(1), "{id}: {run}");
                assert_eq!(run["ok"], false);
                assert!(run["exit_code"].is_null(), "{run}");
                assert!(
                    run["error"].as_str().unwrap().contains(reason),
                    "{id}: {run}"
                );
            }
            None => {
                assert_eq!(code, Some(0), "{run}");
                assert!(
                    run["stdout"].as_str().unwrap().contains("served alongside"),
                    "{run}"
                );
            }
        }
    }
    // The node is still up and serving.
    let run = invoke_json(&c, &["fs-agent"]);
    assert_eq!(run["ok"], true, "{run}");

    // And says what happened: two runs ok, three stopped, four model requests.
    let metrics = spear_tests::http::get(&c.node.http, "/metrics").unwrap();
    // Both binaries' exposition is valid OpenMetrics to Prometheus's parser.
    for (who, text) in [
        ("node", metrics.clone()),
        (
            "sms",
            spear_tests::http::get(&c.sms.metrics, "/metrics").unwrap(),
        ),
    ] {
        let families = spear_tests::peers::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("{who}: {e}\n{text}"));
        assert!(families.len() > 10, "{who}: {families:?}");
        if who == "node" {
            for histogram in [
                "spearlet_guest_run_duration_seconds",
                "spearlet_llm_request_duration_seconds",
                "spearlet_mcp_call_duration_seconds",
            ] {
                assert!(
                    families.iter().any(|f| f == histogram),
                    "{histogram}: {families:?}"
                );
            }
        }
    }
    // The histograms counted what the counters counted: five runs, four
    // model requests, and every filesystem tool call.
    let value = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
            .to_string()
    };
    assert_eq!(value("spearlet_guest_run_duration_seconds_count"), "5");
    assert_eq!(value("spearlet_llm_request_duration_seconds_count"), "4");
    assert_eq!(
        value(r#"spearlet_mcp_call_duration_seconds_count{server="fs"}"#),
        value(r#"spearlet_mcp_calls_total{server="fs"}"#)
    );
    for line in [
        r#"spearlet_guest_runs_total{outcome="ok"} 2"#,
        r#"spearlet_guest_runs_total{outcome="stopped"} 3"#,
        r#"spearlet_guest_runs_total{outcome="failed"} 0"#,
        "spearlet_loop_iterations_total 4",
        "spearlet_guest_runs_in_progress 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing:\n{metrics}"
        );
    }
}

#[test]
fn a_module_served_over_http_is_fetched_checked_and_cached_by_the_node() {
    let c = cluster("over http");
    let web = c.work.path().join("web");
    std::fs::create_dir_all(&web).unwrap();
    std::fs::copy(guest("fs-agent"), web.join("agent.wasm")).unwrap();
    let (mut server, port) = serve_dir(&c, &web);
    // As an operator would compute it.
    let sha = sha256_of(&web.join("agent.wasm"));
    let uri = format!("http://127.0.0.1:{port}/agent.wasm");
    let (code, _, err) = register(
        &c,
        "web-agent",
        Path::new(&uri),
        &fs_task(),
        &["--sha256", &sha],
    );
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["web-agent"]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["stdout"].as_str().unwrap().contains("over http"),
        "{run}"
    );

    // A URI the server answers 404 for is one sentence that says so.
    let other = "1".repeat(64);
    let missing = format!("http://127.0.0.1:{port}/nothing.wasm");
    let (code, _, err) = register(
        &c,
        "missing",
        Path::new(&missing),
        &fs_task(),
        &["--sha256", &other],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "missing"]);
    assert_ne!(code, 0);
    // It says the fetch failed, not what answered (a status is what a
    // probe of the network would want); the node's log has the status.
    assert!(
        err.contains("cannot read the module http://127.0.0.1")
            && err.contains("the server did not answer with the module")
            && !err.contains("404"),
        "{err}"
    );
    assert!(c.node.proc.log().contains("404"));

    // Kept by digest on the node: it runs with the web server gone.
    server.kill();
    let run = invoke_json(&c, &["web-agent"]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(c
        .node
        .state_dir
        .join("modules")
        .join(format!("{sha}.wasm"))
        .exists());

    // A server that is not there at all: a sentence too, not a 404.
    let gone = format!("http://127.0.0.1:{port}/gone.wasm");
    let (code, _, err) = register(
        &c,
        "gone",
        Path::new(&gone),
        &fs_task(),
        &["--sha256", &other],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "gone"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("cannot read the module http://127.0.0.1") && !err.contains("404"),
        "{err}"
    );
}
