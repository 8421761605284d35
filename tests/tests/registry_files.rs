//! What SMS and the node say about the server files themselves, on the real binaries: `sms
//! validate` on a directory (its exit codes and notes), and the secret values in files, which
//! no log, status or view shows.

use std::time::Duration;

use serde_json::Value;
use spear_tests::fixtures::{stdio_server as server, write_file};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(10);

#[test]
fn sms_validate_exit_codes() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin("sms"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let good = tempfile::tempdir().unwrap();
    write_file(good.path(), "a.json", &server("a", "x"));
    let (code, out) = run(&["validate", &good.path().to_string_lossy()]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("warning"), "{out}");

    // Literal secrets are accepted, with a note naming file and JSON path,
    // saying SMS seals them and what to write instead; the value itself is
    // never printed.
    let literal = serde_json::json!({"mcpServers": {"vault": {
        "url": "https://h/mcp",
        "headers": {"X-Api-Key": "sk-literal-123", "Authorization": "Bearer ${TOKEN}"},
    }}});
    write_file(good.path(), "b.json", &literal.to_string());
    write_file(
        good.path(),
        "c.json",
        r#"{"id": "local", "command": "npx", "env": {"API_TOKEN": "tok-literal-456", "REF": "${FROM_NODE}"}}"#,
    );
    let (code, out) = run(&["validate", &good.path().to_string_lossy()]);
    assert_eq!(code, 0, "{out}");
    let notes: Vec<&str> = out.lines().filter(|l| l.starts_with("sealed")).collect();
    assert_eq!(notes.len(), 2, "{out}");
    assert!(
        notes[0].contains("b.json $.mcpServers.vault.headers.X-Api-Key")
            && notes[0].contains("SMS seals")
            && notes[0].contains("${X_API_KEY}"),
        "{out}"
    );
    assert!(
        notes[1].contains("c.json $.env.API_TOKEN") && notes[1].contains("${API_TOKEN}"),
        "{out}"
    );
    assert!(
        !out.contains("literal-123") && !out.contains("literal-456"),
        "{out}"
    );

    let bad = tempfile::tempdir().unwrap();
    write_file(bad.path(), "a.json", &server("a", "x"));
    write_file(bad.path(), "b.json", &server("a", "y"));
    write_file(bad.path(), "c.json", r#"{"id": "Bad Id", "command": "x"}"#);
    let (code, out) = run(&["validate", &bad.path().to_string_lossy()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("a.json") && out.contains("b.json"), "{out}");
    assert!(out.contains("c.json") && out.contains("$.id"), "{out}");
    assert!(out.lines().filter(|l| l.contains("c.json")).count() >= 1);

    let (code, out) = run(&["validate", "/nonexistent/spear-dir"]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = run(&["validate"]);
    assert_eq!(code, 2, "{out}");
}

/// A stdio server whose command is not on this machine passes (nodes run
/// it, and may have it), with a note saying so; one that is here, or
/// written as a reference, gets none.
#[test]
fn sms_validate_notes_a_command_this_machine_lacks() {
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "gone.json",
        r#"{"id": "gone", "command": "/opt/nowhere/mcp-server"}"#,
    );
    write_file(
        dir.path(),
        "name.json",
        r#"{"id": "name", "command": "no-such-mcp-binary-7"}"#,
    );
    write_file(
        dir.path(),
        "here.json",
        r#"{"id": "here", "command": "/bin/sh"}"#,
    );
    write_file(
        dir.path(),
        "ref.json",
        r#"{"id": "ref", "command": "${MCP_BIN}"}"#,
    );
    let out = std::process::Command::new(bin("sms"))
        .arg("validate")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    for (file, command) in [
        ("gone.json", "/opt/nowhere/mcp-server"),
        ("name.json", "no-such-mcp-binary-7"),
    ] {
        assert!(
            text.contains(&format!("{file}: server '{}': its command {command} is not on this machine; every node the server is for must have it (nodes run it, not SMS)", file.trim_end_matches(".json"))),
            "{text}"
        );
    }
    assert!(
        !text.contains("here.json") && !text.contains("ref.json"),
        "{text}"
    );
}

#[test]
fn secrets_never_reach_logs_status_or_views() {
    let secret = "sk-live-DO-NOT-LEAK-0042";
    let dir = tempfile::tempdir().unwrap();
    let good = serde_json::json!({
        "id": "vault",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-everything"],
        "env": {"API_TOKEN": secret, "REF": "${FROM_NODE}"},
    });
    write_file(dir.path(), "vault.json", &good.to_string());
    // A bad file whose problems sit right next to secret values.
    let bad = serde_json::json!({
        "id": "remote",
        "url": "https://h/mcp",
        "headers": {"Bad Header": secret, "Authorization": format!("Bearer {secret} ${{BROKEN")},
    });
    write_file(dir.path(), "remote.json", &bad.to_string());
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node_dir = state.path().join("n1");
    let node = SpearletProc::start("node-1", &sms.grpc, &node_dir);
    eventually("the node to hold vault", SOON, || {
        let view = node.registry()?;
        if view.to_string().contains("vault") {
            Ok(())
        } else {
            Err(view.to_string())
        }
    });
    let status = sms.status();
    assert!(
        status.to_string().contains("remote.json"),
        "the bad file is reported: {status}"
    );

    eventually("the node to persist vault", SOON, || {
        match node.persisted_servers() {
            ids if ids == ["vault"] => Ok(()),
            ids => Err(format!("{ids:?}")),
        }
    });
    let registry_cli = std::process::Command::new(bin("spearlet"))
        .args(["registry", "--json", "--state-dir"])
        .arg(&node_dir)
        .output()
        .unwrap();
    let registry_out = String::from_utf8_lossy(&registry_cli.stdout).into_owned();
    assert!(
        registry_cli.status.success() && registry_out.contains("vault"),
        "spearlet registry: {registry_out}{}",
        String::from_utf8_lossy(&registry_cli.stderr)
    );
    let (code, servers_out, err) = sms.client(&["servers"]);
    assert!(
        code == 0 && servers_out.contains("vault"),
        "sms servers: {servers_out}{err}"
    );
    let outputs = [
        ("sms status", status.to_string()),
        ("sms servers", servers_out),
        ("sms log", sms.proc.log()),
        ("node /registry", node.registry().unwrap().to_string()),
        ("node /status", node.status().unwrap().to_string()),
        ("node log", node.proc.log()),
        ("spearlet registry --json", registry_out),
    ];
    for (what, text) in outputs {
        assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
    }
    assert!(outputs_mention_redaction(&node.registry().unwrap()));
}

fn outputs_mention_redaction(view: &Value) -> bool {
    view.to_string().contains("API_TOKEN") && view.to_string().contains("<redacted>")
}
