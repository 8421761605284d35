//! The operator console in a real browser (Debian's chromium, driven by
//! Playwright; `tests/console/driver.py`), against the real binaries:
//! sign-in and roles, CSRF and cookies, the registry and nodes views
//! updating live, a task registered, invoked and traced from the page,
//! explain, approvals and pins, and hostile strings shown as text.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::certs::Certs;
use spear_tests::console::drive;
use spear_tests::peers::{
    assert_no_secret, drifting_server, node22, npm_dir, oauth_protected_server, python_sdk,
    LinePeer,
};
use spear_tests::procs::bin;
use spear_tests::procs::{SmsOptions, SmsProc};
use spear_tests::tasks::{
    cluster_opts, fs_task, guest, register, second_node, Cluster, ClusterOptions,
};
use spear_tests::trust::{answer_turn, echo_call, invoke_on, trust_cluster, TrustSetup};
use spear_tests::wait::{eventually, free_port};

fn console_cluster(certs: Option<&Certs>) -> Cluster {
    cluster_opts(
        "the launch code is 7-7-alpha",
        ClusterOptions {
            console: true,
            certs,
            ..Default::default()
        },
    )
}

fn text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// Acceptance 1 and 7, plaintext on loopback and under TLS.
fn sign_in_roles_and_csrf(certs: Option<&Certs>) {
    let c = console_cluster(certs);
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let seen = drive("signin", &c.sms, &[("TASK", "fs-agent".into())]);

    let csp = text(&seen["csp"]);
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{seen}"
    );
    let cookie = &seen["cookie"];
    assert_eq!(cookie["httpOnly"], true, "{seen}");
    assert_eq!(cookie["sameSite"], "Strict", "{seen}");
    assert_eq!(cookie["secure"], certs.is_some(), "{seen}");
    if certs.is_some() {
        assert_eq!(cookie["name"], "__Host-spear_console", "{seen}");
    }
    assert_eq!(seen["admin_write_forms"], 1, "{seen}");
    // Writes without the form's token, from another origin or from
    // another site's page are all refused, and the task is still there.
    assert_eq!(seen["no_csrf"][0], 403, "{seen}");
    assert!(text(&seen["no_csrf"][1]).contains("CSRF token"), "{seen}");
    assert_eq!(seen["other_origin"][0], 403, "{seen}");
    assert!(
        text(&seen["other_origin"][1]).contains("cross-site request refused"),
        "{seen}"
    );
    let cross = text(&seen["cross_site"]);
    assert!(
        cross.contains("cross-site request refused") || cross.contains("not signed in"),
        "{seen}"
    );
    assert_eq!(seen["task_after_attacks"], 1, "{seen}");
    // The viewer: no write controls, and a write by hand is refused.
    assert_eq!(seen["viewer_register_forms"], 0, "{seen}");
    assert_eq!(seen["viewer_task_write_forms"], 0, "{seen}");
    assert_eq!(seen["viewer_approve_buttons"], 0, "{seen}");
    assert_eq!(seen["viewer_write"][0], 403, "{seen}");
    assert!(
        text(&seen["viewer_write"][1]).contains("read-only"),
        "{seen}"
    );
    let (code, out, err) = c.sms.client(&["tasks", "list"]);
    assert!(code == 0 && out.contains("fs-agent"), "{out}{err}");
    // Sign-out ends the session: the old cookie opens nothing.
    assert!(text(&seen["after_sign_out"]).ends_with("/login"), "{seen}");
    assert_eq!(seen["old_cookie"][0], 303, "{seen}");
    assert_eq!(seen["old_cookie"][1], "/login", "{seen}");
    // No token reaches SMS's log.
    let log = c.sms.proc.log();
    assert!(!log.contains(spear_tests::tasks::CONSOLE_TOKEN), "{log}");
    assert!(!log.contains(spear_tests::tasks::VIEWER_TOKEN), "{log}");
}

#[test]
fn sign_in_roles_csrf_and_cookies() {
    sign_in_roles_and_csrf(None);
}

#[test]
fn sign_in_roles_csrf_and_cookies_under_tls() {
    let certs = Certs::new("console.test");
    sign_in_roles_and_csrf(Some(&certs));
}

/// Acceptance 2 and 6: files dropped in appear without a reload, a broken
/// file shows its sentence until fixed, and markup is text.
#[test]
fn the_registry_follows_the_directory_live_and_shows_hostile_strings_as_text() {
    let c = console_cluster(None);
    let mcp_dir = c.work.path().join("mcp.d");
    let seen = drive(
        "registry",
        &c.sms,
        &[("MCP_DIR", mcp_dir.display().to_string())],
    );
    eprintln!(
        "appeared after {} ms, problem after {} ms",
        seen["appeared_ms"], seen["problem_ms"]
    );
    assert_eq!(seen["same_document"], true, "the page reloaded: {seen}");
    // The file, the JSON path and the sentence `sms validate` gives for
    // the same file.
    let problem = text(&seen["problem"]);
    let cells: Vec<&str> = problem.split('\t').map(str::trim).collect();
    assert_eq!(cells.len(), 3, "{seen}");
    assert_eq!(cells[0], "broken.json", "{seen}");
    assert!(cells[1].contains("args"), "{seen}");
    let again = c.work.path().join("validate");
    std::fs::create_dir_all(&again).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        again.join("broken.json"),
        json!({"mcpServers": {"later": {"command": "echo", "args": "not a list"}}}).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(bin("sms"))
        .arg("validate")
        .arg(&again)
        .output()
        .unwrap_or_else(|e| panic!("sms validate: {e}"));
    let validate =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        validate.contains(cells[2]),
        "page: {}\nvalidate: {validate}",
        cells[2]
    );
    assert_eq!(seen["hostile_as_text"], true, "{seen}");
    assert_eq!(
        seen["pwned"],
        Value::Null,
        "a script from a server file ran: {seen}"
    );
    assert_eq!(seen["javascript_links"], 0, "{seen}");
    assert_eq!(seen["images"], 0, "{seen}");
    assert_eq!(seen["server_page_pwned"], Value::Null, "{seen}");
    assert_eq!(seen["server_page_text"], true, "{seen}");
}

/// Acceptance 3: two real nodes, one stopped, convergence after a change.
#[test]
fn the_nodes_view_shows_the_fleet_converge_and_a_stopped_node_not_alive() {
    let c = console_cluster(None);
    let b = second_node(&c);
    // node-a connects to fs on first use: one run, so it has a state and
    // a protocol version to show.
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = c.sms.client(&["invoke", "fs-agent", "--node", "node-a"]);
    assert_eq!(code, 0, "{out}{err}");
    let pid = b.proc.pid().unwrap_or_default();
    let seen = drive(
        "nodes",
        &c.sms,
        &[
            ("NODE_B_PID", pid.to_string()),
            ("MCP_DIR", c.work.path().join("mcp.d").display().to_string()),
        ],
    );
    let revision = seen["revision"].as_u64().unwrap_or_default();
    for node in ["node-a", "node-b"] {
        let row = &seen["rows"][node];
        assert_eq!(row["alive"], "alive", "{seen}");
        assert_eq!(row["applied"].as_u64(), Some(revision), "{seen}");
        assert_eq!(row["lag"], 0, "{seen}");
    }
    // node-a's fs server: ready, with the protocol version it agreed.
    let fs = &seen["fs_on_node_a"];
    assert_eq!(fs[1], "ready", "{seen}");
    assert!(text(&fs[2]).starts_with("20"), "{seen}");
    eprintln!(
        "node-b shown not alive {} ms after it was killed",
        seen["not_alive_after_ms"]
    );
    assert!(seen["revision_after"].as_u64() > Some(revision), "{seen}");
    assert_eq!(seen["node_a_after"], seen["revision_after"], "{seen}");
    drop(b);
}

/// Acceptance 4: the fs-agent registered through the page (its module
/// uploaded), invoked with the scripted model; the answer and the trace
/// with the MCP call and its rule.
#[test]
fn the_fs_agent_registered_and_invoked_from_the_page_shows_its_answer_and_trace() {
    let c = console_cluster(None);
    let bad = json!({"mcp": {"enabled": "yes"}});
    let seen = drive(
        "fs_agent",
        &c.sms,
        &[
            ("MODULE", guest("fs-agent").display().to_string()),
            ("CONFIG", fs_task().to_string()),
            ("BAD_CONFIG", bad.to_string()),
        ],
    );
    // The same sentence as the CLI's for the same config.
    let (code, _, err) = register(&c, "bad-config", &guest("fs-agent"), &bad, &[]);
    assert_ne!(code, 0);
    let page_sentence = text(&seen["bad_config"]);
    let cli_sentence = err.trim().trim_start_matches("error: ").to_string();
    assert!(
        !page_sentence.is_empty() && cli_sentence.contains(page_sentence.trim()),
        "page: {page_sentence}\ncli: {cli_sentence}"
    );
    assert!(text(&seen["registered"]).contains("registered"), "{seen}");
    assert!(text(&seen["stdout"]).contains("7-7-alpha"), "{seen}");
    assert!(text(&seen["exit"]).contains("exit 0"), "{seen}");
    let trace = seen["trace"].as_array().cloned().unwrap_or_default();
    let call = trace
        .iter()
        .find(|row| row[3] == "tool call")
        .unwrap_or_else(|| panic!("no tool call in the trace: {seen}"));
    assert_eq!(call[4], "run", "{seen}");
    assert!(text(&call[6]).starts_with("fs · read_"), "{seen}");
    assert!(
        text(&call[7]).contains("allowed by the server's allowed_tools pattern 'read_*'"),
        "{seen}"
    );
    assert!(trace.iter().any(|row| row[3] == "model request"), "{seen}");
    assert!(seen["recent"].as_u64() >= Some(1), "{seen}");
    // The module SMS wrote is the one nodes ran, by its digest.
    let (_, out, _) = c.sms.client(&["tasks", "get", "fs-agent"]);
    assert!(out.contains(&c.modules.display().to_string()), "{out}");
}

/// Acceptance 5: the explain view answers as `spearlet explain` does.
#[test]
fn the_explain_view_gives_the_answer_spearlet_explain_gives() {
    let c = console_cluster(None);
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let set = r#"mcp.tool_allowlist=["read_text_file","list_*"]"#;
    let seen = drive(
        "explain",
        &c.sms,
        &[
            ("NODE", "node-a".into()),
            ("TASK", "fs-agent".into()),
            ("PARAMS", set.into()),
        ],
    );
    let out = std::process::Command::new(bin("spearlet"))
        .args([
            "explain",
            "--task",
            "fs-agent",
            "--sms",
            &c.sms.grpc,
            "--set",
            set,
            "--json",
        ])
        .arg("--state-dir")
        .arg(c.work.path().join("node-a"))
        .env("SMS_ADMIN_TOKEN", spear_tests::tasks::CONSOLE_TOKEN)
        .output()
        .unwrap_or_else(|e| panic!("spearlet explain: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen["explanation"], cli, "page and CLI differ");
    // The answer is about something: fs with some tools offered, some not.
    let fs = cli["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["server_id"] == "fs"))
        .cloned()
        .unwrap_or_default();
    let tools = fs["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        tools.iter().any(|t| t["verdict"]["offered"] == true),
        "{cli}"
    );
    assert!(
        tools.iter().any(|t| t["verdict"]["offered"] == false),
        "{cli}"
    );
}

/// Acceptance 8 (and 6 for a tool's description): an approval given on
/// the page lets the waiting call run; held pins show their diff (markup
/// as text) and are approved from the page.
#[test]
fn an_approval_and_a_pin_diff_are_decided_from_the_page() {
    let setup = TrustSetup {
        server: json!({"approval": {"tools": ["echo"]}}),
        turns: vec![echo_call("call_1", "from the console"), answer_turn()],
        console: true,
        ..TrustSetup::default()
    };
    let (c, dir) = trust_cluster("console trust", setup);
    // A server whose tool description carries markup; its pins wait for
    // an operator ("approve").
    let state = dir.path().join("hostile-state");
    std::fs::create_dir_all(&state).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(state.join("changed"), "yes").unwrap_or_else(|e| panic!("{e}"));
    let hostile = json!({"id": "hostile-tools", "command": python_sdk(),
        "args": [drifting_server(), state, "hostile"], "pin": "approve"});
    std::fs::write(
        c.work.path().join("mcp.d/hostile.json"),
        hostile.to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // The echo task may use both servers: its run lists hostile-tools
    // too (nodes list a server's tools when a run first needs them), so
    // its node reports the held definitions.
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["drifting", "hostile-tools"],
                              "default_server_ids": ["drifting", "hostile-tools"]},
                      "llm": {"backend": "echo"}, "limits": {"wall_ms": 60_000}});
    eventually(
        "hostile-tools in the registry",
        Duration::from_secs(20),
        || {
            let (_, out, err) = c.sms.client(&["servers"]);
            out.contains("hostile-tools")
                .then_some(())
                .ok_or(format!("{out}{err}"))
        },
    );
    let (code, _, err) = register(&c, "echo", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");

    std::thread::scope(|scope| {
        let run = scope.spawn(|| invoke_on(&c, "node-a"));
        let seen = drive("trust", &c.sms, &[("PIN_SERVER", "hostile-tools".into())]);
        let run = run.join().unwrap_or_else(|_| panic!("the run panicked"));
        assert!(text(&seen["pending"]).contains("drifting · echo"), "{seen}");
        // Its page says who asked and until when, and shows the arguments.
        let approval = text(&seen["approval"]);
        for shown in ["node-a", "Expires (UTC)", "drifting · echo", "echo ·"] {
            assert!(approval.contains(shown), "{shown}: {seen}");
        }
        assert!(
            text(&seen["approval_arguments"]).contains("from the console"),
            "{seen}"
        );
        assert!(text(&seen["notice"]).contains("Approved"), "{seen}");
        assert_eq!(run["ok"], true, "{run}");
        assert!(
            text(&run["stdout"]).contains("echo: from the console"),
            "{run}"
        );
        // The diff shows the definition, markup as text, no script run.
        let diff = text(&seen["diff"]);
        assert!(
            diff.contains("<script>window.__pwned = 'tool'</script>"),
            "{seen}"
        );
        assert_eq!(seen["diff_pwned"], Value::Null, "{seen}");
        assert_eq!(seen["diff_javascript_links"], 0, "{seen}");
        assert!(
            text(&seen["pins_notice"]).contains("Pins approved"),
            "{seen}"
        );
    });
    // SMS's chain names the console as who decided.
    let (_, out, _) = c.sms.client(&["audit", "--json"]);
    assert!(out.contains("admin/console"), "{out}");
    let (_, pins, _) = c.sms.client(&["pins", "list", "--json"]);
    let pins: Value = serde_json::from_str(&pins).unwrap_or_default();
    let hostile = pins
        .as_array()
        .and_then(|p| p.iter().find(|s| s["server"] == "hostile-tools"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(hostile["pinned"], 1, "{pins}");
}

/// A login started from the OAuth page: the browser signs in and consents
/// at a real OpenID Provider (oidc-provider) and comes back to the
/// console, which leaves SMS holding the credential, sealed.
#[test]
fn an_oauth_login_started_from_the_page_leaves_sms_a_credential() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (provider_port, console_port) = (free_port(), free_port());
    let issuer = format!("http://127.0.0.1:{provider_port}");
    let tokens = work.path().join("accepted-tokens");
    let server = oauth_protected_server(&issuer, &tokens);
    let resource = server.url("/mcp");
    let mut command = std::process::Command::new(node22());
    command
        .arg(spear_tests::tasks::repo_file(
            "tests/peers/oidc_provider.mjs",
        ))
        .arg(npm_dir())
        .arg(provider_port.to_string())
        .arg(&resource)
        .arg(format!("http://127.0.0.1:{console_port}/oauth/callback"))
        .arg("300")
        .arg("unused-m2m-secret");
    let provider = LinePeer::start(command);
    provider.wait_for("READY ");
    let mcp_dir = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp_dir).unwrap_or_else(|e| panic!("{e}"));
    let servers = json!({"mcpServers": {
        "docs": {"url": resource, "auth": {"client_id": "spear-cli", "scopes": ["docs:read"]}},
    }});
    std::fs::write(mcp_dir.join("servers.json"), servers.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let key = work.path().join("oauth.key");
    let out = std::process::Command::new(bin("sms"))
        .args(["oauth", "keygen"])
        .arg(&key)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(mcp_dir),
        admin_token: Some(spear_tests::tasks::CONSOLE_TOKEN.into()),
        client_presents_token: true,
        console_port: Some(console_port),
        extra: vec!["--oauth-key-file".into(), key.display().to_string()],
        ..Default::default()
    });

    let seen = drive("oauth", &sms, &[("SERVER", "docs".into())]);
    assert_eq!(seen["before"], "not logged in", "{seen}");
    assert_eq!(
        seen["provider_page"]
            .as_str()
            .map(|u| u.starts_with(&issuer)),
        Some(true),
        "{seen}"
    );
    assert_eq!(
        seen["callback"],
        format!("http://127.0.0.1:{console_port}/oauth/callback"),
        "{seen}"
    );
    assert!(
        text(&seen["logged_in"]).contains("docs: valid, scopes docs:read"),
        "{seen}"
    );
    assert_eq!(seen["after"], "valid", "{seen}");

    let (code, out, err) = sms.client(&["oauth", "status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&out).unwrap_or_default();
    let docs = status["credentials"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["server_id"] == "docs"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(docs["state"], "valid", "{status}");
    assert_eq!(docs["logged_in_by"], "admin/console", "{status}");
    // No code or token the provider issued is in SMS's log.
    let mut secrets = provider.values("CODE ");
    secrets.extend(provider.values("REFRESH "));
    assert!(!secrets.is_empty(), "the provider issued nothing");
    assert_no_secret("SMS's log", &sms.proc.log(), &secrets);
    // The callback works once: replaying it is refused.
    assert_eq!(seen["replayed"][0], 400, "{seen}");
    assert!(
        text(&seen["replayed"][1]).contains("used already"),
        "{seen}"
    );
    drop(server);
}
