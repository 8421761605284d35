//! The official MCP Registry's server.json in the MCP dir, end to end: a
//! file for a real npm package (the reference servers, at exact
//! versions) runs on a real node; its `{var}` and positional arguments
//! reach the server's argv as written, with no shell; a secret variable
//! is resolved by the node under its policy and redacted wherever it
//! could show; a file asking for "latest" is refused with its sentence.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::procs::bin;
use spear_tests::tasks::{cluster_opts, guest, register, ClusterOptions};
use spear_tests::wait::eventually;
use spearlet::tools::offered_name;

const SCHEMA: &str = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";
const SECRET: &str = "registry-secret-5c1f3a9e77";

fn write(path: &std::path::Path, value: &Value) {
    std::fs::write(
        path,
        serde_json::to_string_pretty(value).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_server_json_runs_on_a_node_with_argv_as_written_and_its_secret_redacted() {
    std::env::set_var("SPEAR_TEST_GUEST_REGISTRY_SECRET", SECRET);
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let model = work.path().join("model.json");
    write(
        &model,
        &json!({"turns": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
              "function": {"name": offered_name("everything", "get-env"), "arguments": "{}"}}]},
            {"role": "assistant", "content": "the server's environment: {{last_tool_result}}"},
        ]}),
    );
    let c = cluster_opts(
        "unused",
        ClusterOptions {
            models: vec![("registry", model)],
            ..Default::default()
        },
    );
    let mcp_dir = c.work.path().join("mcp.d");
    // A directory whose name a shell would act on.
    let root = c.files.join("a; $(touch pwned) `touch pwned2`");
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{e}"));
    write(
        &mcp_dir.join("files.json"),
        &json!({"$schema": SCHEMA, "name": "io.github.modelcontextprotocol/server-filesystem",
                "version": "2026.8.31", "description": "Files, from the registry.",
                "packages": [{"registryType": "npm", "identifier": "@modelcontextprotocol/server-filesystem",
                              "version": "2026.8.31", "transport": {"type": "stdio"},
                              "packageArguments": [{"type": "positional", "value": "{root}",
                                                    "variables": {"root": {"default": root.display().to_string()}}}]}]}),
    );
    // Spear's settings beside it: pinned as first seen, not held.
    write(
        &mcp_dir.join("files.spear.json"),
        &json!({"pin": "first-seen"}),
    );
    write(
        &mcp_dir.join("everything.json"),
        &json!({"$schema": SCHEMA, "name": "io.github.modelcontextprotocol/everything",
                "version": "2026.8.31", "description": "Every feature of MCP, from the registry.",
                "packages": [{"registryType": "npm", "identifier": "@modelcontextprotocol/server-everything",
                              "version": "2026.8.31", "transport": {"type": "stdio"},
                              "packageArguments": [{"type": "positional", "value": "stdio"}],
                              "environmentVariables": [{"name": "SPEAR_TEST_GUEST_REGISTRY_SECRET",
                                                        "isRequired": true, "isSecret": true}]}]}),
    );
    write(
        &mcp_dir.join("everything.spear.json"),
        &json!({"id": "everything", "pin": "first-seen"}),
    );
    // A PyPI package, as uvx would run it: the node installs it apart and
    // runs it confined, with no uvx on the machine.
    write(
        &mcp_dir.join("time.json"),
        &json!({"$schema": SCHEMA, "name": "io.github.modelcontextprotocol/time",
                "version": "2026.10.19", "description": "Time and time zones, from the registry.",
                "packages": [{"registryType": "pypi", "identifier": "mcp-server-time",
                              "version": "2026.10.19", "transport": {"type": "stdio"}}]}),
    );
    write(
        &mcp_dir.join("time.spear.json"),
        &json!({"id": "time", "pin": "first-seen"}),
    );
    write(
        &mcp_dir.join("floating.json"),
        &json!({"$schema": SCHEMA, "name": "io.github.example/floating", "version": "1.0.0",
                "packages": [{"registryType": "npm", "identifier": "floating-mcp", "version": "latest"}]}),
    );
    // `spearlet mcp --state-dir` reads what the node persisted.
    eventually(
        "the registry servers on the node, persisted",
        Duration::from_secs(30),
        || {
            let persisted = c.node.persisted_servers();
            let has = |id: &str| persisted.iter().any(|s| s == id);
            (has("server-filesystem") && has("everything") && has("time"))
                .then_some(())
                .ok_or(format!("{persisted:?}"))
        },
    );

    // "latest" is refused with its sentence; the others are in, with
    // where they came from.
    let status = c.sms.status();
    let problems = status["file_problems"].to_string();
    assert!(problems.contains("floating.json"), "{problems}");
    assert!(
        problems.contains("'latest', which names different bytes over time"),
        "{problems}"
    );
    let (_, servers, _) = c.sms.client(&["servers"]);
    assert!(
        servers.contains("npm @modelcontextprotocol/server-filesystem@2026.8.31"),
        "{servers}"
    );

    // The PyPI server as the node holds it (its persisted registry): run
    // from its own installed environment, confined.
    let out = std::process::Command::new(bin("spearlet"))
        .args([
            "mcp",
            "call",
            "--server",
            "time",
            "--tool",
            "get_current_time",
        ])
        .args(["--args", r#"{"timezone": "Asia/Tokyo"}"#, "--state-dir"])
        .arg(&c.node.state_dir)
        .env("RUST_LOG", "info")
        .output()
        .unwrap_or_else(|e| panic!("spearlet mcp call: {e}"));
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("\"timezone\":\"Asia/Tokyo\""), "{said}");
    assert!(said.contains("sandbox: confined"), "{said}");

    // The positional argument is the directory, exactly: the server lists
    // it as allowed, and no shell made a file.
    let out = std::process::Command::new(bin("spearlet"))
        .args([
            "mcp",
            "call",
            "--server",
            "server-filesystem",
            "--tool",
            "list_allowed_directories",
        ])
        .arg("--state-dir")
        .arg(&c.node.state_dir)
        .output()
        .unwrap_or_else(|e| panic!("spearlet mcp call: {e}"));
    let listed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{listed}");
    assert!(
        listed.contains("a; $(touch pwned) `touch pwned2`"),
        "{listed}"
    );
    for made in ["pwned", "pwned2"] {
        assert!(
            !c.files.join(made).exists() && !std::path::Path::new(made).exists(),
            "a shell ran: {made}"
        );
    }

    // The secret: resolved on the node (its policy allows SPEAR_TEST_GUEST_*),
    // seen by the server, and never shown.
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["everything"],
                              "default_server_ids": ["everything"]},
                      "llm": {"backend": "registry"}, "limits": {"wall_ms": 120000}});
    let (code, _, err) = register(&c, "registry", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, run, err) = c.sms.client(&["invoke", "registry"]);
    assert_eq!(code, 0, "{run}{err}");
    assert!(
        run.contains("SPEAR_TEST_GUEST_REGISTRY_SECRET"),
        "the server saw no variable: {run}"
    );
    assert!(run.contains("<redacted>"), "{run}");
    for (what, text) in [
        ("the run", run.clone() + &err),
        ("node log", c.node.proc.log()),
        ("SMS log", c.sms.proc.log()),
        (
            "node /registry",
            c.node.registry().map(|v| v.to_string()).unwrap_or_default(),
        ),
        ("SMS status", c.sms.status().to_string()),
        ("sms servers", c.sms.client(&["servers"]).1),
        ("sms audit", c.sms.client(&["audit", "--json"]).1),
    ] {
        assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    }
}
