//! The tool-trust suites' cluster (pins, approvals, audit): SMS, node-a,
//! a real MCP server (Python SDK, `peers/drifting_server.py`) whose
//! `echo` tool may change after its third call, a scripted model, and
//! the `echo` task (the `task-agent` guest) using that server.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::peers::{drifting_server, python_sdk};
use crate::tasks::{cluster_opts, guest, register, Cluster, ClusterOptions};
use crate::wait::eventually;

/// `drifting`'s `echo` as the model names it (`mcp__<b64 server>__<b64 tool>`).
pub const ECHO: &str = "mcp__ZHJpZnRpbmc__ZWNobw";

/// A model turn calling echo with `text`.
pub fn echo_call(id: &str, text: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": id, "type": "function",
        "function": {"name": ECHO, "arguments": json!({"text": text}).to_string()}}]})
}

/// The model's last turn: the answer, with the last tool result in it.
pub fn answer_turn() -> Value {
    json!({"role": "assistant", "content": "answer: {{last_tool_result}}"})
}

/// What the drifting server and the echo task are set up with.
pub struct TrustSetup<'a> {
    /// `drifting_server.py`'s DRIFT ("never" keeps the tool as it is).
    pub drift: &'static str,
    /// More fields of the server's file (`env`, `approval`, ...).
    pub server: Value,
    /// The model's turns.
    pub turns: Vec<Value>,
    /// The task's wall limit.
    pub wall_ms: u64,
    /// The console is on ([`ClusterOptions::console`]).
    pub console: bool,
    /// SMS on this etcd ([`ClusterOptions::etcd`]).
    pub etcd: Option<&'a crate::etcd::EtcdServer>,
}

impl Default for TrustSetup<'_> {
    fn default() -> Self {
        TrustSetup {
            drift: "never",
            server: json!({}),
            turns: vec![echo_call("call_1", "hi"), answer_turn()],
            wall_ms: 60_000,
            console: false,
            etcd: None,
        }
    }
}

/// The cluster for `setup`, named `notes`; the dir its files live in.
pub fn trust_cluster(notes: &str, setup: TrustSetup<'_>) -> (Cluster, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let model = dir.path().join("model.json");
    write(&model, &json!({"turns": setup.turns}));
    let c = cluster_opts(
        notes,
        ClusterOptions {
            models: vec![("echo", model)],
            console: setup.console,
            etcd: setup.etcd,
            ..Default::default()
        },
    );
    let state = dir.path().join("server-state");
    std::fs::create_dir_all(&state).unwrap_or_else(|e| panic!("{e}"));
    // No "pin": the default, first-seen.
    let mut server = json!({"id": "drifting", "command": python_sdk(),
        "args": [drifting_server(), state, setup.drift]});
    if let (Some(fields), Some(extra)) = (server.as_object_mut(), setup.server.as_object()) {
        fields.extend(extra.clone());
    }
    write(&c.work.path().join("mcp.d/drifting.json"), &server);
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["drifting"], "default_server_ids": ["drifting"]},
                      "llm": {"backend": "echo"}, "limits": {"wall_ms": setup.wall_ms}});
    eventually(
        "the drifting server in the registry",
        Duration::from_secs(20),
        || {
            let (code, out, err) = register(&c, "echo", &guest("task-agent"), &task, &[]);
            let (_, servers, _) = c.sms.client(&["servers"]);
            match (code, servers.contains("drifting")) {
                (0, true) => Ok(()),
                _ => Err(format!("{out}{err}{servers}")),
            }
        },
    );
    (c, dir)
}

fn write(path: &Path, value: &Value) {
    std::fs::write(path, value.to_string()).unwrap_or_else(|e| panic!("{e}"));
}

/// Runs the echo task on `node`; the whole answer of `sms invoke --json`.
pub fn invoke_on(c: &Cluster, node: &str) -> Value {
    let (code, out, err) = c.sms.client(&["invoke", "--json", "echo", "--node", node]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let run: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(run["node_id"], node, "{run}");
    run
}

/// Runs the echo task on `node`; the guest's output.
pub fn run_on(c: &Cluster, node: &str) -> String {
    invoke_on(c, node)["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
