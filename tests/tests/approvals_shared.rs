//! Approvals on etcd (issue 40, acceptance 2): two SMS replicas share one
//! etcd. A call on node-a (which follows replica A) waits for its
//! approval; replica B lists it; A is restarted while the call waits, and
//! comes back with it; an admin approves it on B, and the waiting call
//! runs, once, through A. A second approval, denied on A, is seen denied
//! on B.

use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::etcd::EtcdServer;
use spear_tests::procs::{bin, SmsOptions, SmsProc};
use spear_tests::trust::{answer_turn, echo_call, trust_cluster, TrustSetup};
use spear_tests::wait::eventually;

fn pending(sms: &SmsProc) -> Vec<Value> {
    let (code, out, err) = sms.client(&["approvals", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let all: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    all.into_iter()
        .filter(|a| a["state"] == "pending")
        .collect()
}

fn state_of(sms: &SmsProc, id: &str) -> Value {
    let (code, out, err) = sms.client(&["approvals", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let all: Vec<Value> = serde_json::from_str(&out).unwrap();
    all.into_iter()
        .find(|a| a["id"] == id)
        .map(|a| a["state"].clone())
        .unwrap_or_default()
}

#[test]
fn an_approval_asked_through_one_replica_is_decided_on_another_and_survives_a_restart() {
    let etcd = EtcdServer::start();
    let setup = TrustSetup {
        server: json!({"approval": {"tools": ["echo"], "expires_ms": 120000}}),
        turns: vec![
            echo_call("call_1", "hi"),
            echo_call("call_2", "again"),
            answer_turn(),
        ],
        wall_ms: 120_000,
        etcd: Some(&etcd),
        ..TrustSetup::default()
    };
    let (mut c, dir) = trust_cluster("shared approvals", setup);
    let b = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    // The run goes through B (which routes to node-a through etcd), so
    // restarting A does not cut the invocation itself.
    let run = {
        let addr = b.grpc.clone();
        std::thread::spawn(move || {
            std::process::Command::new(bin("sms"))
                .args([
                    "invoke", "--json", "echo", "--node", "node-a", "--addr", &addr,
                ])
                .env_remove("SMS_ADMIN_TOKEN")
                .output()
                .unwrap()
        })
    };
    // Asked through A (node-a's replica), listed on B.
    let first = eventually("a pending approval on B", Duration::from_secs(30), || {
        pending(&b).into_iter().next().ok_or("none yet".to_string())
    });
    let first_id = first["id"].as_str().unwrap().to_string();
    assert_eq!(first["node"], "node-a", "{first}");

    // A restarts while the call waits; it comes back with the approval.
    let options = c.sms.options.clone();
    c.sms.proc.stop();
    c.sms = SmsProc::start(options);
    assert_eq!(state_of(&c.sms, &first_id), "pending", "A lost nothing");

    // Decided on B: the call waiting through A runs.
    let (code, _, err) = b.client(&["approvals", "approve", &first_id]);
    assert_eq!(code, 0, "{err}");
    eventually("the approved call to run", Duration::from_secs(30), || {
        let calls =
            std::fs::read_to_string(dir.path().join("server-state/calls")).unwrap_or_default();
        (calls.trim() == "1").then_some(()).ok_or(calls)
    });
    // A decision twice, on either replica, is refused: it is decided.
    let (code, _, err) = c.sms.client(&["approvals", "deny", &first_id]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot be denied"), "{err}");

    // The second call's approval, denied on A, is denied on B too.
    let second = eventually("the second approval", Duration::from_secs(30), || {
        pending(&c.sms)
            .into_iter()
            .find(|a| a["id"] != first_id.as_str())
            .ok_or("none yet".to_string())
    });
    let second_id = second["id"].as_str().unwrap().to_string();
    let (code, _, err) = c.sms.client(&[
        "approvals",
        "deny",
        &second_id,
        "--reason",
        "once is enough",
    ]);
    assert_eq!(code, 0, "{err}");
    let out = run.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let run: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(run["exit_code"], 0, "{run:#}");
    eventually("B to see the denial", Duration::from_secs(10), || {
        let state = state_of(&b, &second_id);
        (state == "denied").then_some(()).ok_or(state.to_string())
    });
    assert_eq!(state_of(&b, &first_id), "used", "claimed once, through A");
}
