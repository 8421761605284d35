//! Shared by the tool-loop tests: a scripted model server that answers with
//! the exact OpenAI chat completions or Anthropic messages wire format
//! (JSON or event streams), and a fixture with a real MCP server over stdio.
// Each test binary uses some of these helpers.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router as Http};
use parking_lot::Mutex;
use serde_json::{json, Value};
use spear_proto::v1::{ServerSpec, Transport};
use spearlet::cchat::{run_tool_loop, LoopLimits, LoopOutcome, RunBudget};
use spearlet::connections::Connections;
use spearlet::llm::{ChatMessage, LlmBackend, OpenAiBackend, OpenAiConfig, Role};
use spearlet::policy::{SessionPolicy, TaskPolicy};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tools::Router;

/// One scripted answer: HTTP status, Retry-After, body.
pub type Step = (u16, Option<&'static str>, Value);

#[derive(Clone, Default)]
pub struct Script {
    pub steps: Arc<Mutex<VecDeque<Step>>>,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

pub async fn completions(
    State(script): State<Script>,
    headers: axum::http::HeaderMap,
    Json(mut body): Json<Value>,
) -> Response {
    // Keep the auth headers with the body, to check each provider's shape.
    for name in ["authorization", "x-api-key", "anthropic-version"] {
        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
            body[format!("header:{name}")] = json!(value);
        }
    }
    script.requests.lock().push(body);
    let step = script.steps.lock().pop_front();
    let Some((status, retry_after, body)) = step else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response();
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    // A string body is a scripted event stream.
    let mut response = match body {
        Value::String(events) => {
            (status, [("content-type", "text/event-stream")], events).into_response()
        }
        body => (status, Json(body)).into_response(),
    };
    if let Some(value) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", value.parse().unwrap());
    }
    response
}

pub async fn serve(steps: Vec<Step>) -> (Script, SocketAddr) {
    let script = Script {
        steps: Arc::new(Mutex::new(steps.into())),
        requests: Arc::default(),
    };
    let app = Http::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/messages", post(completions))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (script, addr)
}

pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Step {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    (
        200,
        None,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }),
    )
}

pub fn answer(text: &str) -> Step {
    (
        200,
        None,
        json!({
            "id": "chatcmpl-2", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
        }),
    )
}

pub struct Fixture {
    pub router: Router,
    pub connections: Connections,
    pub task: TaskPolicy,
    pub session: SessionPolicy,
}

pub fn fixture() -> Fixture {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/misbehaving_server.py"
    );
    let spec = ServerSpec {
        id: "mb".into(),
        transport: Transport::Stdio as i32,
        command: "python3".into(),
        args: vec![script.into()],
        denied_tools: vec!["env".into()],
        timeouts: Some(spear_proto::v1::Timeouts {
            startup_ms: 0,
            list_tools_ms: 0,
            call_ms: 400,
        }),
        enabled: true,
        ..Default::default()
    };
    let registry = RegistryHandle::new(RegistryView::from_specs([spec]));
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let task = TaskPolicy {
        enabled: true,
        allowed_server_ids: vec!["mb".into()],
        default_server_ids: vec!["mb".into()],
        tool_allowlist: None,
        tool_denylist: vec!["spawn".into()],
    };
    let session = SessionPolicy::from_task(&task);
    Fixture {
        router: Router::new(connections.clone(), registry),
        connections,
        task,
        session,
    }
}

pub fn backend(addr: SocketAddr, max_retries: u32) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        model: "scripted".into(),
        api_key: Some("sk-test-key".into()),
        timeout: Duration::from_secs(10),
        max_retries,
        stream: false,
    })
}

pub fn limits() -> LoopLimits {
    LoopLimits {
        max_iterations: 8,
        max_total_tool_calls: 16,
        deadline: Instant::now() + Duration::from_secs(30),
    }
}

/// Every assistant tool call is answered by exactly one tool message.
impl Fixture {
    /// Runs the loop from `messages`; returns the outcome and the history.
    pub async fn run(
        &self,
        backend: &dyn LlmBackend,
        messages: Vec<ChatMessage>,
        limits: LoopLimits,
    ) -> (LoopOutcome, Vec<ChatMessage>) {
        self.run_within(backend, messages, limits, &mut RunBudget::unlimited())
            .await
    }

    /// [`Fixture::run`] drawing on a run's `budget`.
    pub async fn run_within(
        &self,
        backend: &dyn LlmBackend,
        mut messages: Vec<ChatMessage>,
        limits: LoopLimits,
        budget: &mut RunBudget,
    ) -> (LoopOutcome, Vec<ChatMessage>) {
        let outcome = run_tool_loop(
            backend,
            &self.router,
            &self.task,
            &self.session,
            &mut messages,
            limits,
            budget,
        )
        .await;
        (outcome, messages)
    }
}

pub fn assert_history_valid(messages: &[ChatMessage]) {
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            let answers: Vec<&str> = messages[i + 1..]
                .iter()
                .take_while(|m| m.role == Role::Tool)
                .filter_map(|m| m.tool_call_id.as_deref())
                .collect();
            let asked: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(answers, asked, "tool calls not answered one by one");
        }
    }
}

pub fn anthropic_tool_use(calls: &[(&str, &str, Value)]) -> Step {
    let blocks: Vec<Value> = std::iter::once(json!({"type": "text", "text": "Let me check."}))
        .chain(calls.iter().map(
            |(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        ))
        .collect();
    (
        200,
        None,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "scripted",
            "content": blocks, "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 30, "output_tokens": 9}
        }),
    )
}

pub fn anthropic_answer(text: &str) -> Step {
    (
        200,
        None,
        json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "scripted",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 50, "output_tokens": 4}
        }),
    )
}

pub fn sse(events: &[(Option<&str>, Value)], done: bool) -> Step {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            body.push_str(&format!("event: {name}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    (200, None, Value::String(body))
}
