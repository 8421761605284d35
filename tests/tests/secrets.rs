//! Secrets stay secret (issue 11): values a node resolves from `${NAME}`
//! references (in a URL's path and query, a header, a stdio server's env)
//! appear in no log line, status field, heartbeat stored at SMS, registry
//! view, or tool error a model sees, even when the errors are about exactly
//! the URLs that carry them.

use std::path::Path;

use std::time::Duration;

use serde_json::json;
use spear_tests::peers::{python_http_server, python_sdk, HttpPeer};
use spear_tests::procs::bin;
use spear_tests::tasks::{cluster_opts, guest, register, ClusterOptions};
use spear_tests::wait::{eventually, free_port};
use spearlet::tools::offered_name;

const SECRETS: [(&str, &str); 4] = [
    ("SPEAR_TEST_GUEST_SECRET_PATH", "p4th-s3cret-7q"),
    ("SPEAR_TEST_GUEST_SECRET_QUERY", "q s3cret/&=7z"),
    ("SPEAR_TEST_GUEST_SECRET_HEADER", "h3ader-s3cret-9x"),
    ("SPEAR_TEST_GUEST_SECRET_ENV", "env-s3cret-5w"),
];

const LITERAL: &str = "l1teral-s3cret-4k";

/// Every way a secret could be written out: as is, percent-encoded (in
/// full, or only its spaces), form-encoded, and the part every test secret
/// shares, so a half-redacted value is caught too.
fn forms(secret: &str) -> Vec<String> {
    let full: String = secret
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    vec![
        secret.to_string(),
        full,
        secret.replace(' ', "%20"),
        secret.replace(' ', "+"),
        "s3cret".to_string(),
    ]
}

/// Every audit record the node wrote, as on its disk.
fn audit_files(state_dir: &Path) -> String {
    let files = std::fs::read_dir(state_dir.join("audit"))
        .into_iter()
        .flatten()
        .flatten();
    let text: String = files
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    // The runs above made calls: the records are there to be checked.
    assert!(
        text.contains("\"kind\":\"tool_call\""),
        "no audit records: {text}"
    );
    text
}

fn recording(path: &Path) {
    let read = offered_name("fs", "read_note");
    let recording = json!({"turns": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": read, "arguments": "{}"}}]},
        {"role": "assistant", "content": "the tool said: {{last_tool_result}}"},
    ]});
    std::fs::write(path, recording.to_string()).unwrap();
}

#[test]
fn resolved_secrets_reach_no_log_status_heartbeat_or_model() {
    for (name, value) in SECRETS {
        std::env::set_var(name, value);
    }
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("secrets-model.json");
    recording(&model);
    let c = cluster_opts(
        "unused",
        ClusterOptions {
            models: vec![("secrets", model)],
            ..Default::default()
        },
    );
    let port = free_port();
    let mut cmd = std::process::Command::new(python_sdk());
    cmd.arg(python_http_server())
        .arg(port.to_string())
        .arg(format!("/{}/mcp", SECRETS[0].1));
    let mut peer = HttpPeer::start("python sdk server", cmd, port);
    let url = |port: u16| {
        format!(
            "http://127.0.0.1:{port}/${{SPEAR_TEST_GUEST_SECRET_PATH}}/mcp?key=${{SPEAR_TEST_GUEST_SECRET_QUERY}}"
        )
    };
    // A literal value too, as Claude Desktop files carry them.
    let headers = json!({"Authorization": "Bearer ${SPEAR_TEST_GUEST_SECRET_HEADER}",
                         "X-Literal-Key": LITERAL});
    // The fs-agent guest uses the server "fs": here the Python server, at
    // a URL made of secrets, instead of the filesystem server.
    let servers = json!({"mcpServers": {
        "fs": {"url": url(port), "headers": headers},
        "env": {"command": "sh", "args": ["-c", "echo \"my token is $TOKEN\" >&2; exit 3"],
                "env": {"TOKEN": "${SPEAR_TEST_GUEST_SECRET_ENV}"}},
    }});
    let mcp_dir = c.work.path().join("mcp.d");
    std::fs::write(mcp_dir.join("fs.json"), servers.to_string()).unwrap();
    eventually(
        "the node to have the servers",
        Duration::from_secs(30),
        || {
            let registry = c.node.registry()?.to_string();
            registry.contains("\"env\"").then_some(()).ok_or(registry)
        },
    );

    let config = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs", "env"],
                                "default_server_ids": ["fs", "env"]},
                        "llm": {"backend": "secrets"}, "limits": {"wall_ms": 60000}});
    let (code, _, err) = register(&c, "secrets", &guest("fs-agent"), &config, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, first, err) = c.sms.client(&["invoke", "secrets"]);
    assert_eq!(code, 0, "{first}{err}");
    assert!(
        first.contains("the tool said: a note from python"),
        "{first}"
    );

    // The server goes away: the next call fails.
    peer.proc.kill();
    let (_, second, err2) = c.sms.client(&["invoke", "secrets"]);
    assert!(second.contains("the tool said: "), "{second}{err2}");
    // Runs until one finds the server down and reconnects (after the
    // backoff): the error names the URL, in the node's status and log.
    let mut later = String::new();
    eventually(
        "a reconnect to fail and be reported",
        Duration::from_secs(30),
        || {
            let (_, out, err) = c.sms.client(&["invoke", "secrets"]);
            later.push_str(&out);
            later.push_str(&err);
            let status = c.node.status()?.to_string();
            let reported = status.contains("<redacted>/mcp?key=<redacted>");
            reported.then_some(()).ok_or(format!("{out}\n{status}"))
        },
    );
    // An operator's explanation connects every server, "env" included.
    let task_file = c.work.path().join("secrets-task.json");
    std::fs::write(&task_file, config.to_string()).unwrap();
    let explain = std::process::Command::new(bin("spearlet"))
        .args(["explain", "--task"])
        .arg(&task_file)
        .arg("--state-dir")
        .arg(&c.node.state_dir)
        .output()
        .unwrap();
    let explain = String::from_utf8_lossy(&explain.stdout).into_owned()
        + &String::from_utf8_lossy(&explain.stderr);
    assert!(explain.contains("env"), "{explain}");

    // Everything anyone can read about the node and the servers.
    let texts: Vec<(&str, String)> = vec![
        ("first run", first),
        ("second run", second + &err2),
        ("later runs", later),
        ("spearlet explain", explain),
        ("node log", c.node.proc.log()),
        ("SMS log", c.sms.proc.log()),
        (
            "node /status",
            c.node.status().map(|v| v.to_string()).unwrap_or_default(),
        ),
        (
            "node /registry",
            c.node.registry().map(|v| v.to_string()).unwrap_or_default(),
        ),
        ("SMS status (heartbeats)", c.sms.status().to_string()),
        ("sms servers", c.sms.client(&["servers"]).1),
        ("sms audit", c.sms.client(&["audit", "--json"]).1),
        ("the node's audit files", audit_files(&c.node.state_dir)),
    ];
    for (what, text) in &texts {
        for (name, value) in SECRETS.into_iter().chain([("the literal header", LITERAL)]) {
            for form in forms(value) {
                assert!(
                    !text.contains(&form),
                    "{what} shows {name} as {form:?}:\n{text}"
                );
            }
        }
    }
}
