//! WASM guests on the node runtime: the example guests built from sdk-guest
//! for wasm32-wasip1 (scripts/test.sh builds them), a real filesystem MCP
//! server, a scripted OpenAI-compatible model; and hostile guests that must
//! each end with a clear error while the runtime keeps serving.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::Json;
use serde_json::{json, Value};
use spear_proto::v1::{ServerSpec, Transport};
use spear_tests::peers::npm_bin;
use spearlet::connections::Connections;
use spearlet::llm::{OpenAiBackend, OpenAiConfig};
use spearlet::policy::TaskPolicy;
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::router::Router;
use spearlet::tools::offered_name;
use spearlet::wasm::{GuestLimits, GuestRuntime, RunContext};

fn guest(name: &str) -> Vec<u8> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let exe = std::env::current_exe().unwrap();
            exe.parent()
                .and_then(|p| p.parent())
                .and_then(|p| p.parent())
                .map(PathBuf::from)
                .unwrap()
        });
    let path = target
        .join("wasm32-wasip1/debug/examples")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; build the example guests: cargo build --target wasm32-wasip1 -p spear-guest --examples (scripts/test.sh does)", path.display())
    })
}

/// A model that reads `notes.txt` with the filesystem tool, then answers with
/// what the tool returned (so the answer proves the tool's output reached it).
async fn model(notes: String) -> SocketAddr {
    let read = offered_name("fs", "read_text_file");
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            let (read, notes) = (read.clone(), notes.clone());
            async move {
                let messages = body["messages"].as_array().cloned().unwrap_or_default();
                let last = messages.last().cloned().unwrap_or(Value::Null);
                let message = if last["role"] == "tool" {
                    json!({"role": "assistant", "content": format!("The file says: {}", last["content"].as_str().unwrap_or(""))})
                } else {
                    let args = json!({"path": notes}).to_string();
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_fs", "type": "function", "function": {"name": read, "arguments": args}}]})
                };
                Json(json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

struct Node {
    runtime: GuestRuntime,
    router: Router,
    connections: Connections,
    backend: Arc<OpenAiBackend>,
    _files: tempfile::TempDir,
}

async fn node() -> Node {
    let files = tempfile::tempdir().unwrap();
    let root = files.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "the launch code is 0000").unwrap();
    let spec = ServerSpec {
        id: "fs".into(),
        transport: Transport::Stdio as i32,
        command: npm_bin("mcp-server-filesystem")
            .to_string_lossy()
            .into_owned(),
        args: vec![root.to_string_lossy().into_owned()],
        enabled: true,
        ..Default::default()
    };
    let registry = RegistryHandle::new(RegistryView::from_specs([spec]));
    let (connections, _watch) = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let addr = model(root.join("notes.txt").to_string_lossy().into_owned()).await;
    let backend = Arc::new(OpenAiBackend::new(OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        model: "scripted".into(),
        api_key: None,
        timeout: Duration::from_secs(10),
        max_retries: 0,
        stream: false,
    }));
    let runtime = GuestRuntime::new(None).unwrap();
    Node {
        runtime,
        router: Router::new(connections.clone(), registry),
        connections,
        backend,
        _files: files,
    }
}

fn task() -> TaskPolicy {
    TaskPolicy {
        enabled: true,
        allowed_server_ids: vec!["fs".into()],
        default_server_ids: vec!["fs".into()],
        tool_allowlist: Some(vec!["read_*".into(), "list_*".into()]),
        tool_denylist: vec![],
    }
}

fn context(node: &Node, stdin: &str) -> RunContext {
    RunContext {
        task: task(),
        router: node.router.clone(),
        backend: node.backend.clone(),
        stdin: stdin.as_bytes().to_vec(),
        name: "guest".into(),
        wasi: Default::default(),
    }
}

fn limits() -> GuestLimits {
    GuestLimits {
        cpu: Duration::from_millis(500),
        wall: Duration::from_secs(20),
        ..GuestLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fs_agent_answers_with_what_the_filesystem_server_returned() {
    let node = node().await;
    let pre = node.runtime.load(&guest("fs-agent")).unwrap();
    let outcome = node
        .runtime
        .run(&pre, context(&node, "What does notes.txt say?"), limits())
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
        Some(("fs".to_string(), "read_text_file".to_string()))
    );
    node.connections.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_escalation_guest_is_refused_every_time() {
    let node = node().await;
    let pre = node.runtime.load(&guest("escalation")).unwrap();
    let outcome = node.runtime.run(&pre, context(&node, ""), limits()).await;
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
    assert_eq!(stdout.matches("refused (EACCES)").count(), 3, "{stdout}");
    assert!(
        stdout.contains(r#"mcp.server_ids is still ["fs"]"#),
        "{stdout}"
    );
    node.connections.shutdown().await;
}

/// Runs a hostile module and returns (exit code, error).
async fn hostile(node: &Node, wat: &str) -> (Option<i32>, Option<String>) {
    hostile_under(node, wat, task()).await
}

/// [`hostile`] under another task policy.
async fn hostile_under(node: &Node, wat: &str, task: TaskPolicy) -> (Option<i32>, Option<String>) {
    let pre = node
        .runtime
        .load(wat.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let context = RunContext {
        task,
        ..context(node, "")
    };
    let outcome = node.runtime.run(&pre, context, limits()).await;
    (outcome.exit_code, outcome.error)
}

/// A guest that writes `key = value` (JSON) in a new session and exits with
/// the write's -errno (0 when it was accepted).
fn write_param(key: &str, value: &str) -> String {
    format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_ctl_set_param" (func $set (param i32 i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "{key}")
        (data (i32.const 100) "{}")
        (func (export "_start")
          (call $exit (i32.sub (i32.const 0)
            (call $set (call $create) (i32.const 0) (i32.const {}) (i32.const 100) (i32.const {}))))))"#,
        value.replace('"', "\\\""),
        key.len(),
        value.len()
    )
}

const EXIT: &str = r#"(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guests_end_with_a_clear_error_and_the_node_keeps_serving() {
    let node = node().await;
    let (_, error) = hostile(
        &node,
        r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#,
    )
    .await;
    assert!(
        error.as_deref().unwrap_or("").contains("CPU budget"),
        "{error:?}"
    );

    let bomb = r#"(module (memory (export "memory") 1) (func (export "_start") (loop (drop (memory.grow (i32.const 256))) br 0)))"#;
    let (_, error) = hostile(&node, bomb).await;
    assert!(
        error.as_deref().unwrap_or("").contains("memory"),
        "{error:?}"
    );

    let recursion = r#"(module (memory (export "memory") 1) (func $f (call $f)) (func (export "_start") (call $f)))"#;
    let (_, error) = hostile(&node, recursion).await;
    assert!(
        error.as_deref().unwrap_or("").contains("stack"),
        "{error:?}"
    );

    // Out-of-bounds pointer and length: the host answers -EFAULT (14).
    let oob = format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (func (export "_start")
          (call $exit (i32.sub (i32.const 0)
            (call $write (call $create) (i32.const 65530) (i32.const 100) (i32.const 0) (i32.const 4))))))"#
    );
    assert_eq!(hostile(&node, &oob).await.0, Some(14));

    // An absurd output-buffer capacity next to the end of memory: -EFAULT.
    let absurd = format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_ctl_get_param" (func $get (param i32 i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "mcp.server_ids")
        (data (i32.const 100) "\ff\ff\ff\ff")
        (func (export "_start")
          (call $exit (i32.sub (i32.const 0)
            (call $get (call $create) (i32.const 0) (i32.const 14) (i32.const 65533) (i32.const 100))))))"#
    );
    assert_eq!(hostile(&node, &absurd).await.0, Some(14));

    // Thousands of sessions never closed: -EMFILE (24) once the cap is hit.
    let sessions = format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (memory (export "memory") 1)
        (func (export "_start") (local $i i32) (local $r i32)
          (loop $again
            (local.set $r (call $create))
            (if (i32.lt_s (local.get $r) (i32.const 0)) (then (call $exit (i32.sub (i32.const 0) (local.get $r)))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $again (i32.lt_u (local.get $i) (i32.const 5000))))))"#
    );
    assert_eq!(hostile(&node, &sessions).await.0, Some(24));

    // Escalations through the raw ABI: -EACCES (13), nothing changed.
    let escalate = write_param("mcp.task_tool_denylist", "[]");
    assert_eq!(hostile(&node, &escalate).await.0, Some(13));
    // server_ids outside the task's set.
    let outside = write_param("mcp.server_ids", r#"["fs","other"]"#);
    assert_eq!(hostile(&node, &outside).await.0, Some(13));
    assert_eq!(
        hostile(&node, &write_param("mcp.server_ids", r#"["fs"]"#))
            .await
            .0,
        Some(0),
        "a write within the task is allowed"
    );
    // Enabling MCP where the task forbids it.
    let forbidding = TaskPolicy {
        enabled: false,
        ..task()
    };
    let enable = write_param("mcp.enabled", "true");
    assert_eq!(
        hostile_under(&node, &enable, forbidding.clone()).await.0,
        Some(13)
    );
    assert_eq!(
        hostile_under(&node, &write_param("mcp.enabled", "false"), forbidding)
            .await
            .0,
        Some(0)
    );
    assert_eq!(
        hostile(&node, &enable).await.0,
        Some(0),
        "allowed when the task enables MCP"
    );

    // After all that, a normal guest still runs.
    let pre = node.runtime.load(&guest("fs-agent")).unwrap();
    let outcome = node
        .runtime
        .run(&pre, context(&node, "again"), limits())
        .await;
    assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
    node.connections.shutdown().await;
}
