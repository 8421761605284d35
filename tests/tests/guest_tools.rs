//! Hostile guests against the chat API's new surfaces (issue 10), on the
//! node's guest runtime with the real filesystem MCP server and a scripted
//! model: a guest tool that traps, spins, returns a huge result or calls
//! back into the API; guest-driven calls of a tool never offered, of one
//! the policy now denies, an answer to a made-up tool_call_id; a model,
//! backend or max_iterations outside what the task allows; a dispatcher
//! that breaks its contract. Each ends with a clear errno, error result or
//! stop reason, and the runtime then serves a normal guest.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spear_proto::task::LlmChoice;
use spear_scripted_model::{ScriptedModel, Turn};
use spear_tests::fs_node::FsNode;
use spearlet::cchat::Models;
use spearlet::connections::Connections;
use spearlet::invoke::{ChatRuntime, RunContext, RunLimits, RunOutcome};
use spearlet::llm::{Backends, LlmSection};
use spearlet::tool_policy::TaskPolicy;
use spearlet::tools::{offered_name, Router};
use spearlet::wasm::GuestLimits;

fn guest(name: &str) -> Vec<u8> {
    let path: PathBuf = spear_tests::tasks::guest(name);
    std::fs::read(&path).unwrap()
}

struct Node {
    runtime: ChatRuntime,
    router: Router,
    connections: Connections,
    notes: String,
    _fs: FsNode,
}

fn node() -> Node {
    let fs = FsNode::new("nothing to see");
    Node {
        runtime: spearlet::invoke::runtime(None, None).unwrap(),
        router: fs.router.clone(),
        connections: fs.connections.clone(),
        notes: fs.notes(),
        _fs: fs,
    }
}

/// The node's backends: one, `scripted`, at `model`, offering model `m`
/// and `m2`; the task keeps to `m`.
fn models(model: &ScriptedModel) -> Models {
    let section: LlmSection = serde_json::from_value(json!({"backends": {"scripted": {
        "kind": "openai", "base_url": model.openai_url(), "model": "m", "models": ["m2"]}}}))
    .unwrap();
    let backends = Arc::new(Backends::new(section, |_| None).unwrap());
    Models::of_task(backends, &LlmChoice::default()).unwrap()
}

async fn run(node: &Node, wasm: &[u8], model: &ScriptedModel, stdin: &str) -> RunOutcome {
    let pre = node.runtime.load(wasm).unwrap();
    let context = RunContext {
        scope: Default::default(),
        task: TaskPolicy {
            enabled: true,
            allowed_server_ids: vec!["fs".into()],
            default_server_ids: vec!["fs".into()],
            tool_allowlist: Some(vec!["read_*".into()]),
            tool_denylist: vec![],
            approval: Vec::new(),
        },
        router: node.router.clone(),
        models: models(model),
        stdin: stdin.as_bytes().to_vec(),
        name: "hostile".into(),
        wasi: Default::default(),
    };
    let limits = RunLimits {
        guest: GuestLimits {
            cpu: Duration::from_millis(500),
            wall: Duration::from_secs(20),
            ..GuestLimits::default()
        },
        ..RunLimits::default()
    };
    spearlet::invoke::run(&node.runtime, &pre, context, limits).await
}

/// The text of the tool result the model was shown last.
fn last_tool_result(model: &ScriptedModel) -> String {
    let requests = model.requests();
    let messages = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    tool["content"].as_str().unwrap().to_string()
}

fn probe() -> Turn {
    Turn::calls(&[("call_probe", "probe", json!({}))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guest_tools_end_with_a_reason_and_the_node_keeps_serving() {
    let node = node();
    let hostile = guest("hostile-tools");
    let read = offered_name("fs", "read_text_file");
    let read_call = || Turn::calls(&[("call_fs", &read, json!({"path": node.notes}))]);
    let mut failures = Vec::new();
    let mut check = |case: &str, held: bool, outcome: &RunOutcome| {
        if !held {
            failures.push(format!(
                "{case}: exit {:?}, error {:?}\nstdout: {}\nstderr: {}",
                outcome.exit_code,
                outcome.error,
                String::from_utf8_lossy(&outcome.stdout),
                String::from_utf8_lossy(&outcome.stderr)
            ));
        }
    };
    let stdout = |o: &RunOutcome| String::from_utf8_lossy(&o.stdout).into_owned();
    let error = |o: &RunOutcome| o.error.clone().unwrap_or_default();

    // Traps and limits inside a callback end the run, naming the tool.
    let model = ScriptedModel::script(vec![probe()]).await;
    let o = run(&node, &hostile, &model, "trap").await;
    check(
        "trap",
        o.exit_code.is_none()
            && error(&o).contains("guest tool 'probe' ended the run")
            && error(&o).contains("trapped"),
        &o,
    );
    let model = ScriptedModel::script(vec![probe()]).await;
    let o = run(&node, &hostile, &model, "spin").await;
    check(
        "spin",
        error(&o).contains("guest tool 'probe' ended the run") && error(&o).contains("CPU budget"),
        &o,
    );

    // A huge result: the model is told, the call is counted, the run goes on.
    let model = ScriptedModel::script(vec![probe(), Turn::answer("done")]).await;
    let o = run(&node, &hostile, &model, "huge").await;
    let shown = last_tool_result(&model);
    check(
        "huge",
        o.exit_code == Some(0)
            && stdout(&o).contains("answer: done")
            && shown.contains("over the 1048576 a tool result may be"),
        &o,
    );
    check(
        "huge is counted",
        o.trace.len() == 1
            && o.trace[0].is_error
            && o.trace[0].guest_tool.as_deref() == Some("probe"),
        &o,
    );

    // Arguments too large for a guest tool never reach the guest.
    let huge_args = Turn::calls(&[("call_probe", "probe", json!({"x": "a".repeat(2 << 20)}))]);
    let model = ScriptedModel::script(vec![huge_args, Turn::answer("done")]).await;
    let o = run(&node, &hostile, &model, "trap").await;
    let shown = last_tool_result(&model);
    check(
        "huge arguments",
        o.exit_code == Some(0) && shown.contains("over the 1048576 a guest tool takes"),
        &o,
    );

    // A callback calling back into the API is refused with EBUSY.
    let model = ScriptedModel::script(vec![probe(), Turn::answer("done")]).await;
    let o = run(&node, &hostile, &model, "reenter").await;
    let shown = last_tool_result(&model);
    check("reenter", o.exit_code == Some(0) && shown.contains("inside the callback: Busy: cchat_create cannot be called from a guest tool callback"), &o);

    // Guest-driven calls: only what the last request offered, under the
    // policy as it is now, answered by ids the model gave.
    let model = ScriptedModel::script(vec![Turn::answer("hi")]).await;
    let o = run(&node, &hostile, &model, "not-offered").await;
    check("not-offered", stdout(&o).contains("refused NotFound: tool 'mcp__ZnM__d3JpdGVfZmlsZQ' was not offered in this session's last request"), &o);
    let model = ScriptedModel::script(vec![read_call()]).await;
    let o = run(&node, &hostile, &model, "denied").await;
    check(
        "denied",
        stdout(&o).contains("refused PermissionDenied: tool 'read_text_file' is not allowed now"),
        &o,
    );
    check("denied is not run", o.trace.is_empty(), &o);
    let model = ScriptedModel::script(vec![read_call()]).await;
    let o = run(&node, &hostile, &model, "made-up-id").await;
    let out = stdout(&o);
    check("made-up-id", out.contains("refused InvalidArgument: tool_call_id 'call_never_made' answers no open tool call of this session (open: call_fs)"), &o);
    check(
        "unanswered",
        out.contains("refused InvalidArgument: tool calls call_fs are not answered yet"),
        &o,
    );
    check("one request only", model.requests().len() == 1, &o);

    // Params outside the task: refused, nothing changed.
    let model = ScriptedModel::script(vec![]).await;
    for (mode, refusal, still) in [
        ("model", "model 'gpt-unlisted' is not one the task allows (its llm.model and llm.allowed_models)", "model is still \"m\""),
        ("backend", "backend 'other' is not one the task allows", "backend is still \"scripted\""),
        ("iterations", "max_iterations 1000 is wider than this run's 8 (limits.max_iterations)", "max_iterations is still 8"),
    ] {
        let o = run(&node, &hostile, &model, mode).await;
        let out = stdout(&o);
        check(mode, out.contains(&format!("refused PermissionDenied: permission denied: {refusal}")) && out.contains(still), &o);
    }
    assert!(model.violations().is_empty(), "{:?}", model.violations());

    // The node still serves a guest tool run.
    let model = ScriptedModel::script(vec![probe(), Turn::answer("fine")]).await;
    let o = run(&node, &hostile, &model, "reenter").await;
    check(
        "after all that",
        o.exit_code == Some(0) && stdout(&o).contains("answer: fine"),
        &o,
    );
    node.connections.shutdown().await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A raw guest whose dispatcher breaks its contract, or that has none.
fn dispatcher(result_slot: &str) -> String {
    let spec = r#"{"name": "probe", "parameters": {"type": "object"}}"#;
    let (spec_len, spec) = (spec.len(), spec.replace('"', "\\\""));
    format!(
        r#"(module
        (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_write_fn" (func $write_fn (param i32 i32 i32) (result i32)))
        (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
        (import "spear" "cchat_send" (func $send (param i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "{spec}")
        (data (i32.const 200) "user")
        (data (i32.const 300) "call probe")
        (func (export "spear_alloc") (param i32) (result i32) (i32.const 4096))
        (func (export "spear_tool_call") (param i32 i32 i32 i32) (result i32)
          {result_slot})
        (func (export "_start") (local $h i32) (local $r i32)
          (local.set $h (call $create))
          (local.set $r (call $write_fn (local.get $h) (i32.const 0) (i32.const {spec_len})))
          (if (i32.lt_s (local.get $r) (i32.const 0)) (then (call $exit (i32.sub (i32.const 0) (local.get $r)))))
          (drop (call $write (local.get $h) (i32.const 200) (i32.const 4) (i32.const 300) (i32.const 10)))
          (call $exit (i32.sub (i32.const 0) (call $send (local.get $h) (i32.const 1))))))"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_that_breaks_its_contract_ends_the_run() {
    let node = node();
    let cases = [
        // The result points past the end of memory.
        ("(i32.store (local.get 3) (i32.const 65530)) (i32.store offset=4 (local.get 3) (i32.const 100)) (i32.const 0)", "its result points outside its memory"),
        // An answer that is neither 0 nor 1.
        ("(i32.const 7)", "spear_tool_call returned 7"),
    ];
    for (body, reason) in cases {
        let model = ScriptedModel::script(vec![probe()]).await;
        let o = run(&node, dispatcher(body).as_bytes(), &model, "").await;
        let error = o.error.clone().unwrap_or_default();
        assert!(
            error.contains("guest tool 'probe' ended the run") && error.contains(reason),
            "{reason}: {o:?}"
        );
    }
    // Without the exports, cchat_write_fn is -EINVAL (22) and says why.
    let bare = dispatcher("(i32.const 0)")
        .replace("(export \"spear_tool_call\")", "")
        .replace("(export \"spear_alloc\")", "");
    let model = ScriptedModel::script(vec![]).await;
    let o = run(&node, bare.as_bytes(), &model, "").await;
    assert_eq!(o.exit_code, Some(22), "{o:?}");
    node.connections.shutdown().await;
}
