//! WASM guests on the node runtime: the example guests built from sdk-guest
//! for wasm32-wasip1 (scripts/test.sh builds them), a real filesystem MCP
//! server, a scripted OpenAI-compatible model. The hostile guests, which must
//! each end with a clear error while the runtime keeps serving, are in
//! guests_abi.rs.

use spear_tests::guest_node::{context, guest, limits, node};
use spear_tests::guest_wat::{print_param, refused_then_last_error};
use spearlet::tools::ToolRef;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fs_agent_answers_with_what_the_filesystem_server_returned() {
    let node = node().await;
    let pre = node.runtime.load(&guest("fs-agent")).unwrap();
    let outcome = spearlet::invoke::run(
        &node.runtime,
        &pre,
        context(&node, "What does notes.txt say?"),
        limits(),
    )
    .await;
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{:?} {}",
        outcome.error,
        String::from_utf8_lossy(&outcome.stderr)
    );
    assert!(stdout.contains("the launch code is 0000"), "{stdout}");
    assert_eq!(outcome.trace.len(), 1);
    assert_eq!(
        outcome.trace[0].executed,
        Some(ToolRef {
            server: "fs".into(),
            tool: "read_text_file".into()
        })
    );
    assert_eq!(node.model.violations(), Vec::<String>::new());
    node.connections.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escalation_guest_is_refused_every_time() {
    let node = node().await;
    let pre = node.runtime.load(&guest("escalation")).unwrap();
    let outcome = spearlet::invoke::run(&node.runtime, &pre, context(&node, ""), limits()).await;
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
    assert_eq!(stdout.matches("refused (EACCES): ").count(), 3, "{stdout}");
    // The SDK's error shows the node's own sentence, not just a code.
    for sentence in [
        "mcp.task_tool_denylist is set by the task and is read-only to the guest",
        "server 'not-allowed' is not in the task's mcp.allowed_server_ids",
        "mcp.allowed_server_ids is set by the task and is read-only to the guest",
    ] {
        assert!(
            stdout.contains(sentence),
            "missing {sentence:?} in {stdout}"
        );
    }
    assert!(
        stdout.contains(r#"mcp.server_ids is still ["fs"]"#),
        "{stdout}"
    );
    node.connections.shutdown().await;
}

/// The run's principal (set by SMS, kept in the run's scope) is the
/// guest's to read and never to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_reads_who_the_run_is_for_and_cannot_change_it() {
    let node = node().await;
    let alice =
        spear_proto::v1::Principal::person("https://idp.example", "alice", vec!["eng".into()]);
    let for_alice = |stdin| {
        let mut run = context(&node, stdin);
        run.scope.principal = alice.clone();
        run
    };
    let pre = node
        .runtime
        .load(print_param("principal").as_bytes())
        .unwrap();
    let outcome = spearlet::invoke::run(&node.runtime, &pre, for_alice(""), limits()).await;
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(outcome.exit_code, Some(0), "{:?} {stdout}", outcome.error);
    let read: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        read,
        serde_json::json!({"kind": "person", "issuer": "https://idp.example",
                           "subject": "alice", "groups": ["eng"]})
    );

    let wat = refused_then_last_error("principal", r#"{"kind":"admin","subject":"root"}"#);
    let pre = node.runtime.load(wat.as_bytes()).unwrap();
    let outcome = spearlet::invoke::run(&node.runtime, &pre, for_alice(""), limits()).await;
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(outcome.exit_code, Some(13), "EACCES: {stdout}");
    assert!(stdout.contains("principal is read-only"), "{stdout}");
    node.connections.shutdown().await;
}
