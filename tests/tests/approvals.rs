//! Approvals bound to one call, end to end (docs/trust.md): the real
//! binaries, a real MCP server (Python SDK) whose `echo` needs a
//! person's approval per call, and the scripted model, which checks the
//! history it is sent as the provider would.

use std::time::Duration;

use serde_json::{json, Value};
use spear_proto::v1::approvals_client::ApprovalsClient;
use spear_proto::v1::{ApprovalBinding, ClaimApprovalRequest, RequestApprovalRequest};
use spear_tests::tasks::Cluster;
use spear_tests::trust::{answer_turn, echo_call, invoke_on, trust_cluster, TrustSetup};
use spear_tests::wait::eventually;

fn approvals(c: &Cluster) -> Vec<Value> {
    let (code, out, err) = c.sms.client(&["approvals", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The one pending approval other than `seen`, once there is one.
fn next_pending(c: &Cluster, seen: &[String]) -> Value {
    eventually("a pending approval", Duration::from_secs(30), || {
        let all = approvals(c);
        all.iter()
            .find(|a| a["state"] == "pending" && !seen.iter().any(|s| a["id"] == s.as_str()))
            .cloned()
            .ok_or(format!("{all:?}"))
    })
}

/// How many times the server ran echo (it counts in its state dir).
fn echo_calls(dir: &tempfile::TempDir) -> u64 {
    std::fs::read_to_string(dir.path().join("server-state/calls"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn an_approved_call_runs_once_and_its_approval_fits_no_other_call() {
    let setup = TrustSetup {
        server: json!({"approval": {"tools": ["ech*"]}}),
        turns: vec![
            echo_call("call_1", "hi"),
            echo_call("call_2", "send it elsewhere"),
            answer_turn(),
        ],
        ..TrustSetup::default()
    };
    let (c, dir) = trust_cluster("approvals", setup);
    std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            c.sms
                .client(&["invoke", "--json", "echo", "--node", "node-a"])
        });

        // The first call waits, bound to this call and this run.
        let first = next_pending(&c, &[]);
        let first_id = first["id"].as_str().unwrap().to_string();
        assert_eq!(
            (
                &first["node"],
                &first["task"],
                &first["server"],
                &first["tool"]
            ),
            (
                &json!("node-a"),
                &json!("echo"),
                &json!("drifting"),
                &json!("echo")
            ),
            "{first}"
        );
        assert!(
            first["invocation"].as_str().unwrap().starts_with("inv-"),
            "{first}"
        );
        assert_eq!(first["pin_digest"].as_str().unwrap().len(), 64, "{first}");
        assert_eq!(echo_calls(&dir), 0, "nothing runs before the approval");
        let (code, shown, err) = c.sms.client(&["approvals", "show", &first_id]);
        assert_eq!(code, 0, "{err}");
        let shown: Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(shown["arguments"], json!({"text": "hi"}), "{shown}");

        let (code, out, err) = c.sms.client(&["approvals", "approve", &first_id]);
        assert_eq!(code, 0, "{out}{err}");

        // The model's second call, other arguments: a new approval, with
        // another arguments digest; the first one is spent.
        let second = next_pending(&c, std::slice::from_ref(&first_id));
        assert_ne!(second["arguments_digest"], first["arguments_digest"]);
        assert_eq!(second["invocation"], first["invocation"]);
        assert_eq!(echo_calls(&dir), 1, "the approved call ran once");
        let (code, _, err) = c.sms.client(&["approvals", "approve", &first_id]);
        assert_ne!(code, 0);
        assert!(err.contains("is used"), "{err}");
        let second_id = second["id"].as_str().unwrap();
        let (code, out, err) = c.sms.client(&[
            "approvals",
            "deny",
            second_id,
            "--reason",
            "not to an unknown place",
        ]);
        assert_eq!(code, 0, "{out}{err}");

        // The waiting `sms invoke` named each approval, and its decision.
        let (code, out, err) = run.join().unwrap();
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            err.contains(&format!(
                "waiting for approval {first_id} of drifting · echo on node-a"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "approval {second_id} of drifting · echo on node-a: denied"
            )),
            "{err}"
        );
        // The model reads the denial with its reason; the provider took
        // the history (the run answered).
        let run: Value = serde_json::from_str(&out).unwrap();
        let stdout = run["stdout"].as_str().unwrap_or_default();
        assert!(
            stdout
                .contains("answer: a person denied this call of tool 'echo' of server 'drifting'")
                && stdout.contains("not to an unknown place"),
            "{run}"
        );
        assert_eq!(run["ok"], true, "{run}");
        assert_eq!(echo_calls(&dir), 1, "the denied call did not run");
        // Its trace names the tool and why it did not run.
        let denied = run["trace"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["refused"].as_str().is_some_and(|r| !r.is_empty()))
            .cloned()
            .unwrap_or_default();
        assert!(
            denied["refused"].as_str().is_some_and(|r| r
                .contains("denied this call of tool 'echo' of server 'drifting'")
                && r.contains("not to an unknown place")),
            "{run}"
        );
    });
    let states: Vec<Value> = approvals(&c).iter().map(|a| a["state"].clone()).collect();
    assert_eq!(states.len(), 2);
    assert!(
        states.contains(&json!("used")) && states.contains(&json!("denied")),
        "{states:?}"
    );
}

#[test]
fn an_expired_approval_is_a_tool_result_and_the_run_goes_on() {
    let setup = TrustSetup {
        server: json!({"approval": {"tools": ["echo"], "expires_ms": 1500}}),
        ..TrustSetup::default()
    };
    let (c, dir) = trust_cluster("approvals-expiry", setup);
    // An operator watching: the approval and the records, as they happen.
    let mut watch = std::process::Command::new(spear_tests::procs::bin("sms"));
    watch.args(["events", "--addr", &c.sms.grpc]);
    let events =
        spear_tests::procs::Proc::spawn("sms events", watch, c.work.path().join("events.log"));
    eventually(
        "the watcher to be connected",
        Duration::from_secs(20),
        || {
            let log = events.log();
            log.contains("watching").then_some(()).ok_or(log)
        },
    );
    let run = invoke_on(&c, "node-a");
    let stdout = run["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.contains(
            "answer: nobody approved this call of tool 'echo' of server 'drifting' in time"
        ),
        "{run}"
    );
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(echo_calls(&dir), 0);
    let listed = approvals(&c);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["state"], "expired", "{listed:?}");
    // Too late to approve.
    let id = listed[0]["id"].as_str().unwrap();
    let (code, _, err) = c.sms.client(&["approvals", "approve", id]);
    assert_ne!(code, 0);
    assert!(err.contains("is expired"), "{err}");
    let seen = eventually("the events", Duration::from_secs(20), || {
        let log = events.log();
        let lines: Vec<Value> = log
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let asked = lines
            .iter()
            .any(|e| e["approval"]["state"] == "pending" && e["approval"]["id"] == id);
        let expired = lines
            .iter()
            .any(|e| e["audit"]["outcome"] == "expired" && e["audit"]["approval"] == id);
        (asked && expired).then_some(lines.clone()).ok_or(log)
    });
    assert!(
        seen.iter().any(|e| e["audit"]["kind"] == "model_request"),
        "{seen:?}"
    );
}

/// A binding for a call on a node that says it is `node`.
fn binding(node: &str, arguments: &str) -> ApprovalBinding {
    ApprovalBinding {
        node_id: node.into(),
        task_id: "echo".into(),
        invocation_id: "inv-attacker".into(),
        identity: "sms".into(),
        server_id: "drifting".into(),
        tool: "echo".into(),
        arguments_digest: spear_proto::approvals::arguments_digest(arguments).unwrap(),
        pin_digest: "0".repeat(64),
        policy_revision: 1,
    }
}

#[test]
fn an_approval_is_refused_for_other_arguments_another_node_and_a_replay() {
    let (c, _dir) = trust_cluster("approvals-replay", TrustSetup::default());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut client = runtime
        .block_on(ApprovalsClient::connect(format!("http://{}", c.sms.grpc)))
        .unwrap();
    let asked = binding("node-a", r#"{"text": "hi"}"#);
    let id = runtime
        .block_on(client.request_approval(RequestApprovalRequest {
            binding: Some(asked.clone()),
            arguments: r#"{"text": "hi"}"#.into(),
            expires_in_ms: 60_000,
        }))
        .unwrap()
        .into_inner()
        .approval_id;
    let (code, out, err) = c.sms.client(&["approvals", "approve", &id]);
    assert_eq!(code, 0, "{out}{err}");
    let mut claim = |binding: ApprovalBinding| {
        runtime
            .block_on(client.claim_approval(ClaimApprovalRequest {
                approval_id: id.clone(),
                binding: Some(binding),
            }))
            .map(|_| ())
            .map_err(|status| status.message().to_string())
    };
    let other_args = claim(binding("node-a", r#"{"text": "hi", "to": "elsewhere"}"#));
    assert!(
        other_args
            .as_ref()
            .is_err_and(|e| e.contains("its arguments differs")),
        "{other_args:?}"
    );
    let mut changed_tool = asked.clone();
    changed_tool.pin_digest = "1".repeat(64);
    let changed = claim(changed_tool);
    assert!(
        changed
            .as_ref()
            .is_err_and(|e| e.contains("tool definition (pin)")),
        "{changed:?}"
    );
    let elsewhere = claim(binding("node-b", r#"{"text": "hi"}"#));
    assert!(
        elsewhere
            .as_ref()
            .is_err_and(|e| e.contains("belongs to node 'node-a'")),
        "{elsewhere:?}"
    );
    // Refused claims leave it usable by its own call, once.
    assert_eq!(claim(asked.clone()), Ok(()));
    let replay = claim(asked);
    assert!(
        replay.as_ref().is_err_and(|e| e.contains("is used")),
        "{replay:?}"
    );
}

#[test]
fn a_secret_in_a_calls_arguments_never_reaches_sms_or_the_audit_trail() {
    const SECRET: &str = "sk-approval-secret-7373";
    std::env::set_var("SPEAR_TEST_GUEST_APPROVAL_SECRET", SECRET);
    let setup = TrustSetup {
        server: json!({"approval": {"tools": ["echo"]},
                       "env": {"SECRET": "${SPEAR_TEST_GUEST_APPROVAL_SECRET}"}}),
        // A model talked into sending the server's own secret somewhere.
        turns: vec![
            echo_call("call_1", &format!("token {SECRET}")),
            answer_turn(),
        ],
        ..TrustSetup::default()
    };
    let (c, _dir) = trust_cluster("approvals-secret", setup);
    let shown = std::thread::scope(|scope| {
        let run = scope.spawn(|| invoke_on(&c, "node-a"));
        let pending = next_pending(&c, &[]);
        let id = pending["id"].as_str().unwrap();
        let (code, shown, err) = c.sms.client(&["approvals", "show", id]);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = c.sms.client(&["approvals", "approve", id]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(run.join().unwrap()["ok"], true);
        shown
    });
    assert!(shown.contains("\"text\": \"token <redacted>\""), "{shown}");
    let audit_on_disk: String = std::fs::read_dir(c.node.state_dir.join("audit"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        audit_on_disk.contains("\"outcome\":\"approved\""),
        "{audit_on_disk}"
    );
    let at_sms = eventually("the records at SMS", Duration::from_secs(20), || {
        let (_, out, _) = c.sms.client(&["audit", "--json"]);
        out.contains("\"outcome\":\"approved\"")
            .then_some(out.clone())
            .ok_or(out)
    });
    for (what, text) in [
        ("approvals show", shown),
        (
            "approvals list",
            c.sms.client(&["approvals", "list", "--json"]).1,
        ),
        ("sms audit", at_sms),
        ("the node's audit files", audit_on_disk),
        ("the SMS log", c.sms.proc.log()),
        ("the node log", c.node.proc.log()),
    ] {
        assert!(
            !text.contains(SECRET) && !text.contains("approval-secret"),
            "{what} holds the secret: {text}"
        );
    }
}
