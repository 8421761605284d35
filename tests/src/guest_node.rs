//! A node's guest runtime in-process, for tests that run guests themselves: the example guests
//! built for wasm32-wasip1, the real filesystem server (`fs`) with `notes.txt`, and a scripted
//! model that reads the file with it and answers with what it read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spear_scripted_model::{Recording, ScriptedModel, Source};
use spearlet::cchat::Models;
use spearlet::connections::Connections;
use spearlet::invoke::{ChatRuntime, RunContext, RunLimits};
use spearlet::llm::{OpenAiBackend, OpenAiConfig};
use spearlet::tool_policy::TaskPolicy;
use spearlet::tools::offered_name;
use spearlet::tools::Router;
use spearlet::wasm::GuestLimits;

use crate::fs_node::FsNode;

/// The example guest `name` (sdk-guest, built for wasm32-wasip1), as bytes.
pub fn guest(name: &str) -> Vec<u8> {
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
async fn model(notes: String) -> ScriptedModel {
    let read = offered_name("fs", "read_text_file");
    let args = json!({"path": notes}).to_string();
    let recording = json!({"turns": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_fs", "type": "function", "function": {"name": read, "arguments": args}}]},
        {"role": "assistant", "content": "The file says: {{last_tool_result}}"},
    ]});
    let recording = Recording::parse(&recording.to_string()).unwrap();
    let listen = "127.0.0.1:0".parse().unwrap();
    ScriptedModel::start(Source::Replay(recording), listen, Duration::ZERO)
        .await
        .unwrap()
}

/// The runtime, the router over `fs` and the model a guest runs against.
pub struct Node {
    pub runtime: ChatRuntime,
    pub router: Router,
    pub connections: Connections,
    pub backend: Arc<OpenAiBackend>,
    pub model: ScriptedModel,
    _fs: FsNode,
}

/// A node whose `fs` serves a `notes.txt` saying "the launch code is 0000".
pub async fn node() -> Node {
    let fs = FsNode::new("the launch code is 0000");
    let model = model(fs.notes()).await;
    let backend = Arc::new(OpenAiBackend::new(OpenAiConfig {
        base_url: model.openai_url(),
        model: "scripted".into(),
        api_key: None,
        timeout: Duration::from_secs(10),
        max_retries: 0,
        stream: false,
    }));
    let runtime = spearlet::invoke::runtime(None, None).unwrap();
    Node {
        runtime,
        router: fs.router.clone(),
        connections: fs.connections.clone(),
        backend,
        model,
        _fs: fs,
    }
}

/// A task that may read and list with `fs`, and nothing else.
pub fn task() -> TaskPolicy {
    TaskPolicy {
        enabled: true,
        allowed_server_ids: vec!["fs".into()],
        default_server_ids: vec!["fs".into()],
        tool_allowlist: Some(vec!["read_*".into(), "list_*".into()]),
        tool_denylist: vec![],
        approval: Vec::new(),
    }
}

/// A run of [`task`] on `node` reading `stdin`, with the scripted model.
pub fn context(node: &Node, stdin: &str) -> RunContext {
    RunContext {
        scope: Default::default(),
        task: task(),
        router: node.router.clone(),
        models: Models::fixed("scripted", node.backend.clone()),
        stdin: stdin.as_bytes().to_vec(),
        name: "guest".into(),
        wasi: Default::default(),
    }
}

/// Half a second of CPU and 20 s of wall time.
pub fn limits() -> RunLimits {
    RunLimits {
        guest: GuestLimits {
            cpu: Duration::from_millis(500),
            wall: Duration::from_secs(20),
            ..GuestLimits::default()
        },
        ..RunLimits::default()
    }
}
