//! The audit trail end to end (docs/trust.md): the real binaries, real
//! MCP servers, the node's records on disk and SMS's copy of them.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::audit_trail::{audit, on_disk, routed_again, seqs, verify};
use spear_tests::etcd::EtcdServer;
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::tasks::{
    cluster, cluster_opts, fs_task, guest, invoke_json, register, ClusterOptions,
};
use spear_tests::trust::{invoke_on, trust_cluster, TrustSetup};
use spear_tests::wait::eventually;

/// Restarts `node` as if it crashed before it kept its shipper's place:
/// it sends every record it has again. Returns their seqs once it has.
fn ship_everything_again(node: &mut SpearletProc) -> BTreeSet<u64> {
    let state_dir = node.state_dir.clone();
    node.proc.stop();
    let written = seqs(&on_disk(&state_dir));
    std::fs::remove_file(state_dir.join("audit/shipped")).unwrap();
    node.start_in_place();
    let last = written.last().copied().unwrap_or_default();
    eventually(
        "the node to ship everything again",
        Duration::from_secs(20),
        || {
            let place =
                std::fs::read_to_string(state_dir.join("audit/shipped")).unwrap_or_default();
            (place.trim() == last.to_string())
                .then_some(())
                .ok_or(place)
        },
    );
    written
}

#[test]
fn an_fs_agent_run_is_audited_call_by_call_with_outcome_and_rule() {
    let c = cluster("audit");
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["fs-agent"]);
    assert_eq!(run["ok"], true, "{run}");
    let calls = run["trace"].as_array().unwrap().len();
    assert!(calls >= 1, "{run}");
    let invocation = run["invocation_id"].as_str().unwrap().to_string();

    let records = eventually("the run's records at SMS", Duration::from_secs(20), || {
        let records = audit(&c, &["--task", "fs-agent"]);
        let tool_calls = records.iter().filter(|r| r["kind"] == "tool_call").count();
        (tool_calls == calls)
            .then_some(records.clone())
            .ok_or(format!("{records:?}"))
    });
    for record in records.iter().filter(|r| r["kind"] == "tool_call") {
        assert_eq!(record["outcome"], "run", "{record}");
        assert_eq!(record["server"], "fs", "{record}");
        assert_eq!(record["invocation"], invocation.as_str(), "{record}");
        assert_eq!(record["node"], "node-a", "{record}");
        // The rule `spearlet explain` names: the server's file and the
        // guest's session both allow read_* only.
        assert_eq!(
            record["rule"],
            "allowed by the server's allowed_tools pattern 'read_*' and the session's mcp.tool_allowlist pattern 'read_*'",
            "{record}"
        );
        assert_eq!(record["args"].as_str().unwrap().len(), 64, "{record}");
        assert_eq!(record["pin"].as_str().unwrap().len(), 64, "{record}");
        assert!(record["policy_revision"].as_u64().is_some(), "{record}");
        // Never the arguments or the result in clear.
        assert!(!record.to_string().contains("notes.txt"), "{record}");
    }
    // The table names kinds as the records and docs do.
    let (code, table, err) = c.sms.client(&["audit", "--task", "fs-agent"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains(" tool_call ") && table.contains(" model_request "),
        "{table}"
    );
    let model = records
        .iter()
        .find(|r| r["kind"] == "model_request")
        .unwrap();
    assert_eq!(model["outcome"], "answered", "{model}");
    assert!(model["output_tokens"].as_u64().is_some(), "{model}");

    // The table names each call's outcome and rule.
    let (code, table, err) = c
        .sms
        .client(&["audit", "--task", "fs-agent", "--outcome", "run"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("fs/") && l.contains(" run "))
            .count(),
        calls,
        "{table}"
    );
    assert!(
        table.contains("allowed by the server's allowed_tools pattern 'read_*'"),
        "{table}"
    );
    // Admin writes are records too, in SMS's own chain.
    let admin = audit(&c, &["--node", "sms"]);
    let registered = admin
        .iter()
        .find(|r| r["action"] == "register_task" && r["target"] == "fs-agent")
        .unwrap_or_else(|| panic!("{admin:?}"));
    assert_eq!(registered["outcome"], "run", "{registered}");
    assert_eq!(registered["kind"], "admin", "{registered}");
    assert!(registered["identity"].is_string(), "{registered}");
    let (code, _, _) = c.sms.client(&["tasks", "delete", "no-such-task"]);
    assert_ne!(code, 0);
    let refused = eventually(
        "the refused delete recorded",
        Duration::from_secs(10),
        || {
            audit(&c, &["--node", "sms", "--outcome", "failed"])
                .into_iter()
                .find(|r| r["action"] == "delete_task")
                .ok_or("none".to_string())
        },
    );
    assert!(
        refused["rule"].as_str().unwrap().contains("no-such-task"),
        "{refused}"
    );
    let (code, out) = verify(&c);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("node node-a:") && out.contains("chain whole"),
        "{out}"
    );
    assert!(out.contains("node sms:"), "{out}");
}

#[test]
fn a_crash_loses_no_acknowledged_record_a_resent_shipment_is_kept_once_and_an_edit_is_named() {
    let setup = TrustSetup {
        server: json!({"approval": {"tools": ["echo"]}}),
        ..TrustSetup::default()
    };
    let (mut c, _dir) = trust_cluster("audit-crash", setup);
    let state_dir = c.node.state_dir.clone();
    // A run in the middle of a call (waiting for a person): SIGKILL.
    std::thread::scope(|scope| {
        let sms = &c.sms;
        let run = scope.spawn(move || sms.client(&["invoke", "echo", "--node", "node-a"]));
        eventually(
            "the call to wait, recorded",
            Duration::from_secs(30),
            || {
                let disk = on_disk(&state_dir);
                disk.iter()
                    .any(|r| r["outcome"] == "waiting")
                    .then_some(())
                    .ok_or(format!("{disk:?}"))
            },
        );
        c.node.proc.kill();
        let _ = run.join();
    });
    let acknowledged = seqs(&on_disk(&state_dir));
    assert!(!acknowledged.is_empty());

    let (_, out, _) = c.sms.client(&["approvals", "list", "--json"]);
    let before: Vec<Value> = serde_json::from_str(&out).unwrap();

    // Restarted, the node ships what it had not, and goes on with the
    // same chain: another run, denied this time.
    c.node.start_in_place();
    routed_again(&c);
    std::thread::scope(|scope| {
        let run = scope.spawn(|| invoke_on(&c, "node-a"));
        let pending = eventually("a new pending approval", Duration::from_secs(30), || {
            let (_, out, _) = c.sms.client(&["approvals", "list", "--json"]);
            let all: Vec<Value> = serde_json::from_str(&out).unwrap_or_default();
            all.into_iter()
                .find(|a| a["state"] == "pending" && !before.iter().any(|b| b["id"] == a["id"]))
                .ok_or(out)
        });
        let (code, _, err) = c
            .sms
            .client(&["approvals", "deny", pending["id"].as_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(run.join().unwrap()["ok"], true);
    });
    // The run's last record (its final model request) may still be on its
    // way to disk: compare what is on disk and at SMS each time.
    let at_sms = eventually("every record at SMS", Duration::from_secs(20), || {
        let written = seqs(&on_disk(&state_dir));
        let held = seqs(&audit(&c, &["--node", "node-a"]));
        (held == written)
            .then_some(held.clone())
            .ok_or(format!("{held:?} vs {written:?}"))
    });
    assert!(
        acknowledged.is_subset(&at_sms),
        "acknowledged before the crash: {acknowledged:?}"
    );
    assert!(at_sms.len() > acknowledged.len());
    let outcomes: Vec<Value> = audit(&c, &["--node", "node-a", "--tool", "echo"])
        .iter()
        .map(|r| r["outcome"].clone())
        .collect();
    assert!(outcomes.contains(&json!("approval_denied")), "{outcomes:?}");
    let (code, out) = verify(&c);
    assert_eq!(code, 0, "{out}");

    // The shipper's place lost (a crash before it was written): the node
    // sends everything again; SMS keeps each record once.
    let written = ship_everything_again(&mut c.node);
    assert_eq!(audit(&c, &["--node", "node-a"]).len(), written.len());

    // A record edited on the node's disk: the node's verify names it.
    c.node.proc.stop();
    let file = std::fs::read_dir(state_dir.join("audit"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replacen("\"outcome\":\"waiting\"", "\"outcome\":\"approved\"", 1);
    assert_ne!(text, edited);
    std::fs::write(&file, edited).unwrap();
    let waiting_seq = on_disk(&state_dir)
        .iter()
        .find(|r| r["outcome"] == "approved" && r["kind"] == "tool_call")
        .and_then(|r| r["seq"].as_u64())
        .unwrap();
    let out = std::process::Command::new(spear_tests::procs::bin("spearlet"))
        .arg("audit-verify")
        .arg("--state-dir")
        .arg(&state_dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("record {waiting_seq} was altered")),
        "{said}"
    );
}

/// `sms audit --json` with `filters`, asked of `sms`.
fn audit_at(sms: &SmsProc, filters: &[&str]) -> Vec<Value> {
    let mut args = vec!["audit", "--json"];
    args.extend_from_slice(filters);
    let (code, out, err) = sms.client(&args);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn on_etcd_the_trail_outlives_sms_every_replica_reads_it_and_an_edit_there_is_named() {
    let etcd = EtcdServer::start();
    let mut c = cluster_opts(
        "audit-etcd",
        ClusterOptions {
            etcd: Some(&etcd),
            ..Default::default()
        },
    );
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let run = invoke_json(&c, &["fs-agent"]);
    assert_eq!(run["ok"], true, "{run}");
    let calls = run["trace"].as_array().unwrap().len();
    // The run's last record is its final model request (written just
    // after the run answers).
    let before = eventually("the run's records at SMS", Duration::from_secs(20), || {
        let records = audit_at(&c.sms, &["--task", "fs-agent"]);
        let tool_calls = records.iter().filter(|r| r["kind"] == "tool_call").count();
        let ended = records.last().is_some_and(|r| r["kind"] == "model_request");
        (tool_calls == calls && ended)
            .then_some(records.clone())
            .ok_or(format!("{records:?}"))
    });

    // A second replica on the same etcd reads the same trail.
    let b = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    assert_eq!(audit_at(&b, &["--task", "fs-agent"]), before);

    // The node sends everything again (its place lost): etcd keeps each
    // record once.
    let written = ship_everything_again(&mut c.node);
    assert_eq!(
        seqs(&audit_at(&b, &["--node", "node-a"])),
        written,
        "each record once"
    );
    assert_eq!(audit_at(&b, &["--task", "fs-agent"]), before);

    // SMS restarts: the trail is still there, and its own chain goes on
    // where it was (one record per admin write, sealed after the last).
    c.sms = c.sms.restart();
    assert_eq!(audit_at(&c.sms, &["--task", "fs-agent"]), before);
    let (code, _, err) = register(&c, "fs-agent-2", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = c.sms.client(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("node node-a:") && out.contains("node sms:"),
        "{out}"
    );
    let own: Vec<Value> = audit_at(&c.sms, &[])
        .into_iter()
        .filter(|r| r["kind"] == "admin" && r["action"] == "register_task")
        .collect();
    assert!(own.len() >= 2, "{own:?}");
    assert!(
        own.iter()
            .all(|r| r["node"].as_str().unwrap().starts_with("sms:")),
        "{own:?}"
    );

    // A record edited in etcd: verify names it, on any replica.
    let target = before.iter().find(|r| r["kind"] == "tool_call").unwrap();
    let key = format!(
        "/spear/audit/node-a/{:020}",
        target["seq"].as_u64().unwrap()
    );
    let edited = serde_json::to_string(target)
        .unwrap()
        .replace("\"outcome\":\"run\"", "\"outcome\":\"denied\"");
    etcd.etcdctl(&["put", &key, &edited]).unwrap();
    let (code, out, _) = b.client(&["audit", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "node node-a: NOT WHOLE: record {} was altered",
            target["seq"]
        )),
        "{out}"
    );
}

/// A node whose audit directory is wiped goes on from SMS's copy with a
/// `reset` record: its next run's records reach SMS (none refused as
/// conflicts with the old seqs), and `sms audit verify` names the reset.
#[test]
fn a_wiped_audit_directory_goes_on_from_sms_with_a_named_reset() {
    let (mut c, _dir) = trust_cluster("audit-wiped", TrustSetup::default());
    assert_eq!(invoke_on(&c, "node-a")["ok"], true);
    let state_dir = c.node.state_dir.clone();
    let before = eventually("node-a's records at SMS", Duration::from_secs(20), || {
        let written = seqs(&on_disk(&state_dir));
        let held = seqs(&audit(&c, &["--node", "node-a"]));
        (held == written && !held.is_empty())
            .then_some(held.clone())
            .ok_or(format!("{held:?} vs {written:?}"))
    });
    // Stopped, the node writes nothing more; SMS holds all it wrote.
    c.node.proc.stop();
    let before = eventually("every record at SMS", Duration::from_secs(20), || {
        let written = seqs(&on_disk(&state_dir));
        let held = seqs(&audit(&c, &["--node", "node-a"]));
        (held == written)
            .then_some(held.clone())
            .ok_or(format!("{held:?} vs {written:?} (first {before:?})"))
    });
    let last = before.iter().max().copied().unwrap_or(0);
    std::fs::remove_dir_all(state_dir.join("audit")).unwrap();
    c.node.start_in_place();
    routed_again(&c);
    assert_eq!(invoke_on(&c, "node-a")["ok"], true);
    let written = seqs(&on_disk(&state_dir));
    assert_eq!(written.iter().min(), Some(&(last + 1)), "{written:?}");
    eventually("the new records at SMS", Duration::from_secs(20), || {
        let written = seqs(&on_disk(&state_dir));
        let held = seqs(&audit(&c, &["--node", "node-a"]));
        written
            .is_subset(&held)
            .then_some(())
            .ok_or(format!("{held:?} vs {written:?}"))
    });
    let (code, out) = verify(&c);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("reset at seq {}", last + 1)), "{out}");
}
