//! Whose call is it: people signed in at a real OpenID Provider
//! (oidc-provider, `peers/oidc_people.mjs`) invoke a task through SMS over
//! mutual TLS with only SMS's CA and their ID token; the task's
//! "invokers" decide who may; every audit record of the run names the
//! person (principal) and the node (actor). Expired, foreign, forged and
//! unlisted tokens are refused before anything runs, and no token shows
//! in SMS's or the node's logs.

use std::process::Command;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use spear_tests::audit_trail::audit;
use spear_tests::certs::Certs;
use spear_tests::console::drive;
use spear_tests::peers::{node22, npm_dir, oauth_protected_server, peer_file, sign_in, LinePeer};
use spear_tests::people::{invoke_as, provider, provider_for, run_of, trusting};
use spear_tests::procs::bin;
use spear_tests::tasks::{calling_once, cluster_opts, fs_task, guest, register, ClusterOptions};
use spear_tests::wait::{eventually, free_port};

/// `token` with its payload's `sub` changed and the signature kept: a
/// forgery.
fn forged(token: &str, sub: &str) -> String {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    let mut payload: Value = serde_json::from_slice(&engine.decode(parts[1]).unwrap()).unwrap();
    payload["sub"] = json!(sub);
    let payload = engine.encode(payload.to_string());
    format!("{}.{payload}.{}", parts[0], parts[2])
}

#[test]
fn people_invoke_as_themselves_and_only_as_listed() {
    let work = tempfile::tempdir().unwrap();
    let (_idp, issuer) = provider(work.path(), "idp");
    let (_other, foreign) = provider(work.path(), "other-idp");
    let certs = Certs::new("spear.test");
    let c = cluster_opts(
        "the notes of principals",
        ClusterOptions {
            certs: Some(&certs),
            sms_args: trusting(&issuer),
            ..Default::default()
        },
    );
    let mut task = fs_task();
    task["invokers"] = json!(["subject:alice", "group:ops"]);
    let (code, _, err) = register(&c, "notes", &guest("fs-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");

    // alice is listed by subject, carol by her group: each runs as herself,
    // with no certificate of her own.
    let alice = sign_in(&issuer, "alice", &[]);
    let carol = sign_in(&issuer, "carol", &[]);
    let mut invocations = Vec::new();
    for (who, token) in [("alice", &alice), ("carol", &carol)] {
        let (code, out) = invoke_as(&c, &certs, "notes", token);
        assert_eq!(code, 0, "{who}: {out}");
        let run = run_of(&out);
        assert_eq!(run["ok"], true, "{who}: {run}");
        invocations.push((who, run["invocation_id"].as_str().unwrap().to_string()));
    }

    // bob signs in fine but is not listed.
    let bob = sign_in(&issuer, "bob", &[]);
    let (code, out) = invoke_as(&c, &certs, "notes", &bob);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(&format!("{issuer}#bob may not invoke task 'notes': the task's \"invokers\" do not list them; an admin adds \"subject:bob\"")),
        "{out}"
    );
    // Another issuer's alice is not our alice.
    let (code, out) = invoke_as(&c, &certs, "notes", &sign_in(&foreign, "alice", &[]));
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(&format!("the principal token is refused: the token was issued by '{foreign}', which SMS does not trust (it trusts '{issuer}')")),
        "{out}"
    );
    // bob's token made to say alice.
    let (code, out) = invoke_as(&c, &certs, "notes", &forged(&bob, "alice"));
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("the token's signature does not verify against its issuer's keys"),
        "{out}"
    );
    // Neither a token nor a certificate: nothing to go on.
    let (code, out) = c.sms.client_as(
        &["invoke", "notes"],
        &["--tls-ca".into(), certs.ca().display().to_string()],
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("InvokeTask refused before it was read: this port needs a client certificate from the installation's CA; a person invokes with their OpenID Connect token instead (sms invoke --principal-token)"),
        "{out}"
    );

    // Every record of each run names its person and the node that acted.
    for (who, invocation) in &invocations {
        let records = eventually("the run's records at SMS", Duration::from_secs(20), || {
            let records: Vec<Value> = audit(&c, &["--task", "notes"])
                .into_iter()
                .filter(|r| r["invocation"] == invocation.as_str())
                .collect();
            let kinds: Vec<&str> = records.iter().filter_map(|r| r["kind"].as_str()).collect();
            (kinds.contains(&"tool_call") && kinds.contains(&"model_request"))
                .then_some(records.clone())
                .ok_or(format!("{records:?}"))
        });
        for record in &records {
            assert_eq!(record["principal"], format!("{issuer}#{who}"), "{record}");
            assert_eq!(record["actor"], "node/node-a", "{record}");
        }
    }
    // An admin's own run is theirs.
    let (code, out, err) = c.sms.client(&["invoke", "--json", "notes"]);
    assert_eq!(code, 0, "{out}{err}");
    let admin_run: Value = serde_json::from_str(&out).unwrap();
    let invocation = admin_run["invocation_id"].as_str().unwrap().to_string();
    let records = eventually("the admin run's records", Duration::from_secs(20), || {
        let records: Vec<Value> = audit(&c, &["--task", "notes"])
            .into_iter()
            .filter(|r| r["invocation"] == invocation.as_str())
            .collect();
        (!records.is_empty())
            .then_some(records.clone())
            .ok_or(format!("{records:?}"))
    });
    for record in &records {
        assert_eq!(record["principal"], "admin/ops", "{record}");
    }

    // An ID token that lives two seconds: refused once it has expired
    // (after SMS's 30 s of allowed clock skew), before anything runs. The
    // token is checked before the task is looked up, so asking for a task
    // that does not exist runs nothing while waiting: "not found" until
    // the token expires.
    let short = sign_in(&issuer, "alice", &["short"]);
    let refused = eventually(
        "the short-lived token to expire",
        Duration::from_secs(90),
        || {
            let (_, out) = invoke_as(&c, &certs, "no-such-task", &short);
            (!out.contains("no-such-task"))
                .then_some(out.clone())
                .ok_or(out)
        },
    );
    assert!(
        refused.contains("the principal token is refused: the token has expired; sign in again"),
        "{refused}"
    );

    // No token, nor its signature, in any log.
    for token in [&alice, &carol, &bob, &short] {
        let signature = token.rsplit('.').next().unwrap();
        for (name, log) in [("sms", c.sms.proc.log()), ("node", c.node.proc.log())] {
            assert!(!log.contains(signature), "a token in the {name} log");
        }
    }
}

/// dave belongs to 560 groups: his ID token is over 20 KiB, as tokens
/// from large directories are. It travels to SMS in a header, and SMS
/// takes it (it once answered an HTTP error the CLI read as "plain
/// HTTP"); a token past what SMS reads is refused before it is sent.
#[test]
fn a_person_with_a_20_kib_token_invokes_and_a_larger_one_is_named() {
    let work = tempfile::tempdir().unwrap();
    let (_idp, issuer) = provider(work.path(), "idp");
    let certs = Certs::new("spear.test");
    let c = cluster_opts(
        "the notes of a large directory",
        ClusterOptions {
            certs: Some(&certs),
            sms_args: trusting(&issuer),
            ..Default::default()
        },
    );
    let mut task = fs_task();
    task["invokers"] = json!(["group:ops"]);
    let (code, _, err) = register(&c, "notes", &guest("fs-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    let dave = sign_in(&issuer, "dave", &[]);
    assert!(
        dave.len() > 20 * 1024,
        "dave's token is {} bytes",
        dave.len()
    );
    let (code, out) = invoke_as(&c, &certs, "notes", &dave);
    assert_eq!(code, 0, "{out}");
    assert_eq!(run_of(&out)["ok"], true, "{out}");
    let huge = format!("{dave}{}", "A".repeat(64 * 1024));
    let (code, out) = invoke_as(&c, &certs, "notes", &huge);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("KiB, over the 64 KiB SMS reads of a principal token"),
        "{out}"
    );
}

#[test]
fn people_sign_in_to_the_console_at_the_issuer_and_reach_only_their_tasks() {
    let work = tempfile::tempdir().unwrap();
    let console_port = free_port();
    let callback = format!("http://127.0.0.1:{console_port}/login/oidc/callback");
    let (_idp, issuer) = provider_for(work.path(), "idp", Some(&callback));
    let c = cluster_opts(
        "the notes of the console's people",
        ClusterOptions {
            console: true,
            console_port: Some(console_port),
            sms_args: trusting(&issuer),
            ..Default::default()
        },
    );
    for (task, invokers) in [
        ("notes", json!(["subject:alice", "subject:bob"])),
        ("ops-only", json!(["group:ops"])),
    ] {
        let mut config = fs_task();
        config["invokers"] = invokers;
        let (code, _, err) = register(&c, task, &guest("fs-agent"), &config, &[]);
        assert_eq!(code, 0, "{err}");
    }
    let seen = drive(
        "person",
        &c.sms,
        &[
            ("PERSON", "alice".to_string()),
            ("OTHER_PERSON", "bob".to_string()),
            ("TASK", "notes".to_string()),
            ("OTHER_TASK", "ops-only".to_string()),
        ],
    );
    let alice = format!("{issuer}#alice");
    // The person signs in at the issuer's own pages.
    assert!(
        seen["issuer_page"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{issuer}/interaction/")),
        "{seen}"
    );
    assert_eq!(
        seen["signed_in"],
        format!("Signed in as {alice}."),
        "{seen}"
    );
    assert_eq!(seen["replayed"], 400, "{seen}");
    // mallory's sign-in, finished in alice's browser, opens nothing.
    assert_eq!(seen["login_csrf"][0], 403, "{seen}");
    assert!(
        seen["login_csrf"][1]
            .as_str()
            .unwrap()
            .contains("this sign-in was started in another browser; sign in again from this one"),
        "{seen}"
    );
    assert_eq!(seen["role"], format!("Signed in as {alice}"), "{seen}");
    assert_eq!(seen["nav"], json!(["Tasks", "Accounts"]), "{seen}");
    assert_eq!(seen["tasks"], json!(["notes"]), "{seen}");
    assert_eq!(seen["recent_shown"], 0, "{seen}");
    assert!(
        seen["exit"].as_str().unwrap().starts_with("ok exit 0"),
        "{seen}"
    );
    assert_eq!(seen["/audit"][0], 403, "{seen}");
    assert_eq!(seen["/oauth"][0], 403, "{seen}");
    assert_eq!(seen["/tasks/ops-only"][0], 403, "{seen}");
    assert!(
        seen["/tasks/ops-only"][1]
            .as_str()
            .unwrap()
            .contains(&format!("{alice} may not invoke task 'ops-only'")),
        "{seen}"
    );
    assert_eq!(seen["home"], format!("{}/tasks", c.sms.console), "{seen}");
    // Her run's trace is hers: bob, listed on the same task, opens its
    // page by the invocation id and reads nothing of it.
    assert!(seen["own_trace_rows"].as_u64() >= Some(1), "{seen}");
    assert_eq!(seen["other_trace_rows"], 0, "{seen}");
    assert_eq!(seen["other_fetch"][0], 200, "{seen}");
    for (what, text) in [
        ("page", &seen["other_page"]),
        ("page's refresh", &seen["other_fetch"][1]),
    ] {
        let text = text.as_str().unwrap();
        assert!(
            !text.contains(&alice),
            "alice named in bob's {what}: {text}"
        );
        assert!(
            !text.contains("read_text_file"),
            "alice's call in bob's {what}: {text}"
        );
    }
    // The run from the page is hers: every record names her.
    let records = eventually("the console run's records", Duration::from_secs(20), || {
        let records = audit(&c, &["--task", "notes"]);
        (records.iter().any(|r| r["kind"] == "tool_call"))
            .then_some(records.clone())
            .ok_or(format!("{records:?}"))
    });
    for record in &records {
        assert_eq!(record["principal"], alice.as_str(), "{record}");
    }
}

/// A server whose people log in themselves (`"per_principal": true`):
/// alice connects her own account at its authorization server (another
/// oidc-provider) from the console, and her run's call carries her token;
/// bob, who never connected, gets the sentence, not hers.
#[test]
fn each_person_connects_their_own_account_and_only_their_runs_use_it() {
    let work = tempfile::tempdir().unwrap();
    let console_port = free_port();
    // Mutual TLS: SMS gives a person's token only to a node it can name.
    let certs = Certs::new("spear.test");
    let console = format!("https://127.0.0.1:{console_port}");
    let (_idp, issuer) = provider_for(
        work.path(),
        "idp",
        Some(&format!("{console}/login/oidc/callback")),
    );
    // The server's own authorization server, and the server.
    let as_port = free_port();
    let as_issuer = format!("http://127.0.0.1:{as_port}");
    let tokens = work.path().join("accepted-tokens");
    let server = oauth_protected_server(&as_issuer, &tokens);
    let resource = server.url("/mcp");
    let mut command = Command::new(node22());
    command
        .arg(peer_file("oidc_provider.mjs"))
        .arg(npm_dir())
        .arg(as_port.to_string())
        .arg(&resource)
        .arg(format!("{console}/oauth/callback"))
        .arg("300")
        .arg("unused-m2m-secret");
    let provider = LinePeer::start(command);
    provider.wait_for("READY ");
    let key = work.path().join("oauth.key");
    let out = Command::new(bin("sms"))
        .args(["oauth", "keygen"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let c = cluster_opts(
        "unused",
        ClusterOptions {
            console: true,
            certs: Some(&certs),
            console_port: Some(console_port),
            models: vec![("docs", calling_once(work.path(), "docs", "read_note"))],
            sms_args: [
                trusting(&issuer),
                vec!["--oauth-key-file".into(), key.display().to_string()],
            ]
            .concat(),
            ..Default::default()
        },
    );
    let file = json!({"mcpServers": {"docs": {"url": resource,
        "auth": {"client_id": "spear-cli", "scopes": ["docs:read"], "per_principal": true}}}});
    std::fs::write(c.work.path().join("mcp.d/docs.json"), file.to_string()).unwrap();
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["docs"], "default_server_ids": ["docs"]},
                      "llm": {"backend": "docs"}, "invokers": ["subject:alice", "subject:bob"],
                      "limits": {"wall_ms": 60000}});
    // SMS lists it as each person's: no admin logs the cluster in to it.
    let listed = eventually("SMS to read docs.json", Duration::from_secs(20), || {
        let (_, out, _) = c.sms.client(&["oauth", "status", "--json"]);
        let status: Value = serde_json::from_str(&out).unwrap_or_default();
        let docs = status["credentials"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["server_id"] == "docs").cloned());
        docs.ok_or(out)
    });
    assert_eq!(listed["state"], "on demand", "{listed}");
    let (code, _, err) = register(&c, "docs-task", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");

    let seen = drive(
        "connect",
        &c.sms,
        &[
            ("PERSON", "alice".to_string()),
            ("OTHER", "bob".to_string()),
            ("SERVER", "docs".to_string()),
            ("TASK", "docs-task".to_string()),
        ],
    );
    assert_eq!(seen["before"], "not logged in", "{seen}");
    assert!(
        seen["provider_page"]
            .as_str()
            .unwrap()
            .starts_with(&as_issuer),
        "{seen}"
    );
    assert_eq!(seen["after"], "valid", "{seen}");
    assert!(
        seen["person_run"]
            .as_str()
            .unwrap()
            .contains("the server said: authorized"),
        "{seen}"
    );
    let other = seen["other_run"].as_str().unwrap();
    assert!(
        other.contains(&format!(
            "{issuer}#bob has no login for server 'docs' (they never connected their account); they connect their account"
        )) && !other.contains("authorized"),
        "{seen}"
    );
    // The server accepted exactly one token: alice's.
    let accepted = std::fs::read_to_string(&tokens).unwrap_or_default();
    assert_eq!(
        accepted
            .lines()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        1,
        "{accepted}"
    );
    for token in accepted.lines() {
        let signature = token.rsplit('.').next().unwrap();
        for (name, log) in [("sms", c.sms.proc.log()), ("node", c.node.proc.log())] {
            assert!(
                !log.contains(signature),
                "an access token in the {name} log"
            );
        }
    }
}
