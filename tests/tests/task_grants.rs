//! What a task may ask of a node, end to end with the real binaries: WASI
//! grants (args, env, directories) given only when the task asks and the
//! node's policy allows, and every request beyond the policy or the node's
//! caps refused with the key and the setting named.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use spear_tests::tasks::{cluster, guest, invoke_json, register};

#[test]
fn a_guest_gets_args_env_and_directories_only_when_its_task_grants_them() {
    let c = cluster("granted notes");
    let granted = json!({"wasi": {
        "args": ["--verbose"],
        "env": {"GREETING": "hej", "TOKEN": "${SPEAR_TEST_GUEST_TOKEN}"},
        "dirs": [{"host": c.files, "guest": "/data"}],
    }});
    let (code, _, err) = register(&c, "grants", &guest("grants"), &granted, &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["grants"]);
    let out = run["stdout"].as_str().unwrap();
    assert_eq!(run["ok"], true, "{run}");
    assert!(out.contains(r#"args: ["grants", "--verbose"]"#), "{out}");
    // The reference was resolved on the node; SMS holds only the reference.
    assert!(
        out.contains(r#"env: [("GREETING", "hej"), ("TOKEN", "guest-token-granted")]"#),
        "{out}"
    );
    let (_, task, _) = c.sms.client(&["tasks", "get", "grants"]);
    assert!(
        task.contains("${SPEAR_TEST_GUEST_TOKEN}") && !task.contains("guest-token-granted"),
        "{task}"
    );
    assert!(out.contains("/data/notes.txt: granted notes"), "{out}");
    assert!(
        out.contains("write: refused"),
        "read-only unless writable: {out}"
    );
    assert!(!c.files.join("written.txt").exists());

    // Writable when the task says so.
    let mut writable = granted.clone();
    writable["wasi"]["dirs"][0]["writable"] = json!(true);
    let (code, _, err) = register(&c, "grants-rw", &guest("grants"), &writable, &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["grants-rw"]);
    assert!(
        run["stdout"].as_str().unwrap().contains("write: ok"),
        "{run}"
    );
    assert_eq!(
        std::fs::read_to_string(c.files.join("written.txt")).unwrap(),
        "from the guest"
    );

    // Nothing granted: no args, no environment (not even the node's), no files.
    let (code, _, err) = register(&c, "bare", &guest("grants"), &json!({}), &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["bare"]);
    let out = run["stdout"].as_str().unwrap();
    assert!(out.contains(r#"args: ["bare"]"#), "{out}");
    assert!(out.contains("env: []"), "{out}");
    assert!(out.contains("/data: "), "{out}");
    assert!(!out.contains("granted notes"), "{out}");

    // A reference the node cannot resolve is refused before the run.
    let unset = json!({"wasi": {"env": {"TOKEN": "${SPEAR_TEST_GUEST_UNSET}"}}});
    let (code, _, err) = register(&c, "unset-ref", &guest("grants"), &unset, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "unset-ref"]);
    assert_ne!(code, 0);
    assert!(
        err.contains(
            "wasi.env.TOKEN refers to ${SPEAR_TEST_GUEST_UNSET}, which is not set on this node"
        ),
        "{err}"
    );

    // A granted directory missing on the node is refused with that sentence.
    let missing = json!({"wasi": {"dirs": [{"host": "/nonexistent/spear", "guest": "/data"}]}});
    let (code, _, err) = register(&c, "missing-dir", &guest("grants"), &missing, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "missing-dir"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("cannot open the directory /nonexistent/spear the task grants"),
        "{err}"
    );
}

/// What a task may ask of a node is the node's decision (docs/tasks.md, "Node policy"):
/// each of these is refused at invoke, naming the key and the policy
/// setting, before it takes a run slot.
#[test]
fn tasks_asking_beyond_the_node_policy_are_refused_naming_key_and_setting() {
    let c = cluster("policy");
    let state = c.node.state_dir.display().to_string();
    let dir = |host: &str, writable: bool| json!({"wasi": {"dirs": [{"host": host, "guest": "/data", "writable": writable}]}});
    let env = |reference: &str| json!({"wasi": {"env": {"X": reference}}});
    let cases = [
        (
            "etc",
            dir("/etc", false),
            "not under any directory in this node's policy.dirs",
        ),
        ("root", dir("/", false), "never grantable"),
        ("state", dir(&state, false), "never grantable"),
        ("proc", dir("/proc", false), "never grantable"),
        ("var", env("${HOME}"), "policy.env does not list it"),
        ("llm-key", env("${SPEAR_TEST_MODEL_KEY}"), "api_key_env"),
        (
            "own",
            env("${SPEARLET_ADMIN_TOKEN:-x}"),
            "the node's own settings",
        ),
        (
            "model",
            json!({"llm": {"model": "gpt-9-unlimited"}}),
            "llm.backends.replay.models",
        ),
    ];
    for (id, config, needle) in &cases {
        let (code, _, err) = register(&c, id, &guest("grants"), config, &[]);
        assert_eq!(code, 0, "{id}: {err}");
        let (code, _, err) = c.sms.client(&["invoke", id]);
        assert_ne!(code, 0, "{id}");
        assert!(err.contains(needle), "{id}: {err}");
    }
    for (id, uri) in [
        (
            "elsewhere",
            "https://modules.example.com/a.wasm".to_string(),
        ),
        ("zero", "file:///dev/zero".to_string()),
        ("plain-http", "http://10.1.2.3/a.wasm".to_string()),
    ] {
        let (code, _, err) = register(
            &c,
            id,
            Path::new(&uri),
            &json!({}),
            &["--sha256", &"2".repeat(64)],
        );
        assert_eq!(code, 0, "{id}: {err}");
        let (code, _, err) = c.sms.client(&["invoke", id]);
        assert_ne!(code, 0, "{id}");
        assert!(err.contains("policy.modules"), "{id}: {err}");
    }
    // Nothing ran, and an allowed grant still works.
    let metrics = spear_tests::http::get(&c.node.http, "/metrics").unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"spearlet_guest_runs_total{outcome="ok"} 0"#),
        "{metrics}"
    );

    // A server file whose env reads the node's LLM key: that server fails
    // with the sentence, the other one serves the same run.
    let leaky = json!({"mcpServers": {"leaky": {
        "command": spear_tests::peers::npm_bin("mcp-server-filesystem"), "args": [c.files],
        "env": {"STOLEN": "${SPEAR_TEST_MODEL_KEY}"},
    }}});
    let mcp_dir = c.work.path().join("mcp.d");
    std::fs::write(mcp_dir.join("leaky.json"), leaky.to_string()).unwrap();
    spear_tests::wait::eventually("the node to have leaky", Duration::from_secs(20), || {
        let registry = c.node.registry()?;
        if registry.to_string().contains("leaky") {
            Ok(())
        } else {
            Err(registry.to_string())
        }
    });
    let both = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs", "leaky"],
                              "default_server_ids": ["fs", "leaky"]}});
    // Sends with the task's default servers; traps unless the send succeeded.
    let sender = c.modules.join("sender.wat");
    std::fs::write(
        &sender,
        r#"(module
      (import "spear" "cchat_create" (func $create (result i32)))
      (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
      (import "spear" "cchat_send" (func $send (param i32 i32) (result i32)))
      (memory (export "memory") 1)
      (data (i32.const 0) "user")
      (data (i32.const 8) "Read notes.txt")
      (func (export "_start") (local $h i32)
        (local.set $h (call $create))
        (drop (call $write (local.get $h) (i32.const 0) (i32.const 4) (i32.const 8) (i32.const 14)))
        (if (call $send (local.get $h) (i32.const 1)) (then unreachable))))"#,
    )
    .unwrap();
    let (code, _, err) = register(&c, "both", &sender, &both, &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["both"]);
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["trace"][0]["server_id"], "fs", "fs still serves: {run}");
    assert_eq!(run["trace"][0]["is_error"], false, "fs still serves: {run}");
    let status = c.node.status().unwrap();
    let leaky = &status["mcp_servers"]["leaky"];
    assert_eq!(leaky["state"], "failed", "{status}");
    let why = leaky["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("env.STOLEN refers to ${SPEAR_TEST_MODEL_KEY}") && why.contains("api_key_env"),
        "{why}"
    );
    assert!(
        !status.to_string().contains("sk-test-never-logged"),
        "{status}"
    );
    let files = c.files.display().to_string();
    let (code, _, err) = register(&c, "allowed", &guest("grants"), &dir(&files, true), &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["allowed"]);
    assert!(
        run["stdout"].as_str().unwrap().contains("write: ok"),
        "{run}"
    );
}
