//! The auto tool-call loop against a scripted OpenAI-compatible server (the
//! exact chat completions wire format) and a real MCP server over stdio.

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
use spearlet::cchat::{run_tool_loop, LoopError, LoopLimits};
use spearlet::connections::Connections;
use spearlet::llm::{
    AnthropicBackend, AnthropicConfig, ChatMessage, OpenAiBackend, OpenAiConfig, Role,
};
use spearlet::policy::{SessionPolicy, TaskPolicy};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::router::Router;
use spearlet::tools::offered_name;

/// One scripted answer: HTTP status, Retry-After, body.
type Step = (u16, Option<&'static str>, Value);

#[derive(Clone, Default)]
struct Script {
    steps: Arc<Mutex<VecDeque<Step>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

async fn completions(
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

async fn serve(steps: Vec<Step>) -> (Script, SocketAddr) {
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

fn tool_calls(calls: &[(&str, &str, Value)]) -> Step {
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

fn answer(text: &str) -> Step {
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

struct Fixture {
    router: Router,
    connections: Connections,
    task: TaskPolicy,
    session: SessionPolicy,
}

fn fixture() -> Fixture {
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
    let (connections, _watch) = Connections::new(registry.clone(), Arc::new(|_: &str| None));
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

fn backend(addr: SocketAddr, max_retries: u32) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        model: "scripted".into(),
        api_key: Some("sk-test-key".into()),
        timeout: Duration::from_secs(10),
        max_retries,
        stream: false,
    })
}

fn limits() -> LoopLimits {
    LoopLimits {
        max_iterations: 8,
        max_total_tool_calls: 16,
        deadline: Instant::now() + Duration::from_secs(30),
    }
}

/// Every assistant tool call is answered by exactly one tool message.
fn assert_history_valid(messages: &[ChatMessage]) {
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

#[tokio::test]
async fn single_and_parallel_calls_then_an_answer() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let (script, addr) = serve(vec![
        tool_calls(&[("call_1", &ok, json!({}))]),
        tool_calls(&[
            ("call_2", &ok, json!({})),
            ("call_3", &huge, json!({"bytes": 12})),
        ]),
        answer("all done"),
    ])
    .await;
    let mut messages = vec![ChatMessage::system("be brief"), ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend(addr, 0),
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("all done"));
    assert_eq!(outcome.iterations, 3);
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (40, 17)
    );
    assert_eq!(outcome.trace.len(), 3);
    assert!(outcome
        .trace
        .iter()
        .all(|t| !t.is_error && t.executed.is_some()));
    assert_history_valid(&messages);

    let requests = script.requests.lock().clone();
    assert_eq!(requests[0]["header:authorization"], "Bearer sk-test-key");
    // The tools were injected with their offered names; denied ones were not.
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&ok.as_str()) && !names.contains(&offered_name("mb", "env").as_str()));
    assert!(!names.contains(&offered_name("mb", "spawn").as_str()));
    // The third request carries both results, each under its tool_call_id.
    let last: Vec<&Value> = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(last.len(), 3);
    assert_eq!(
        (
            last[1]["tool_call_id"].as_str(),
            last[1]["content"].as_str()
        ),
        (Some("call_2"), Some("ok"))
    );
    assert_eq!(
        (
            last[2]["tool_call_id"].as_str(),
            last[2]["content"].as_str()
        ),
        (Some("call_3"), Some("xxxxxxxxxxxx"))
    );
    f.connections.shutdown().await;
}

#[tokio::test]
async fn errors_unknown_and_denied_tools_are_answered_never_run() {
    let f = fixture();
    let (script, addr) = serve(vec![
        tool_calls(&[
            ("c1", &offered_name("mb", "hang"), json!({})),
            ("c2", "mcp__invented__name", json!({})),
            ("c3", &offered_name("mb", "env"), json!({})),
            ("c4", "mcp.mb.spawn", json!({})),
        ]),
        answer("recovered"),
    ])
    .await;
    let mut messages = vec![ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend(addr, 0),
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("recovered"));
    assert_history_valid(&messages);
    let trace = &outcome.trace;
    assert!(
        trace[0].is_error && trace[0].executed.is_some(),
        "the hung call ran and timed out"
    );
    for t in &trace[1..] {
        assert!(
            t.is_error && t.executed.is_none(),
            "{} must not run",
            t.name
        );
    }
    let tool_texts: Vec<String> = script.requests.lock()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(tool_texts[0].contains("timed out"), "{tool_texts:?}");
    assert!(tool_texts[1].contains("not offered"), "{tool_texts:?}");
    f.connections.shutdown().await;
}

#[tokio::test]
async fn limits_end_the_loop_with_a_valid_history() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let (_, addr) = serve(vec![tool_calls(&[
        ("a", &ok, json!({})),
        ("b", &ok, json!({})),
        ("c", &ok, json!({})),
    ])])
    .await;
    let mut messages = vec![ChatMessage::user("go")];
    let tight = LoopLimits {
        max_total_tool_calls: 2,
        ..limits()
    };
    let outcome = run_tool_loop(
        &backend(addr, 0),
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        tight,
    )
    .await;
    assert!(
        matches!(outcome.result, Err(LoopError::MaxToolCalls(2))),
        "{:?}",
        outcome.result
    );
    assert_history_valid(&messages);
    assert_eq!(
        outcome
            .trace
            .iter()
            .filter(|t| t.executed.is_some())
            .count(),
        2
    );
    assert!(messages
        .last()
        .unwrap()
        .content
        .as_deref()
        .unwrap()
        .contains("max_total_tool_calls"));

    let (_, addr) = serve(
        (0..5)
            .map(|i| tool_calls(&[(["x", "y", "z", "u", "v"][i], &ok, json!({}))]))
            .collect(),
    )
    .await;
    let mut messages = vec![ChatMessage::user("go")];
    let short = LoopLimits {
        max_iterations: 2,
        ..limits()
    };
    let outcome = run_tool_loop(
        &backend(addr, 0),
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        short,
    )
    .await;
    assert!(
        matches!(outcome.result, Err(LoopError::MaxIterations(2))),
        "{:?}",
        outcome.result
    );
    assert_history_valid(&messages);
    assert_eq!(messages.last().unwrap().role, Role::Tool);
    f.connections.shutdown().await;
}

#[tokio::test]
async fn provider_429_is_retried_and_500_to_the_end_is_a_clear_error() {
    let f = fixture();
    let busy = (
        429,
        Some("0"),
        json!({"error": {"message": "Rate limit reached", "type": "rate_limit"}}),
    );
    let (script, addr) = serve(vec![busy, answer("after the wait")]).await;
    let mut messages = vec![ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend(addr, 3),
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("after the wait"));
    assert_eq!(script.requests.lock().len(), 2);

    let broken = || {
        (
            500,
            None,
            json!({"error": {"message": "upstream exploded", "type": "server_error"}}),
        )
    };
    let (script, addr) = serve(vec![broken(), broken(), broken()]).await;
    let mut messages = vec![ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend(addr, 2),
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    let error = outcome.result.unwrap_err().to_string();
    assert!(
        error.contains("500") && error.contains("upstream exploded"),
        "{error}"
    );
    assert!(!error.contains("sk-test-key"));
    assert_eq!(script.requests.lock().len(), 3, "one try and two retries");
    assert_eq!(
        messages.len(),
        1,
        "a failed send leaves the history as it was"
    );
    f.connections.shutdown().await;
}

fn anthropic_tool_use(calls: &[(&str, &str, Value)]) -> Step {
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

fn anthropic_answer(text: &str) -> Step {
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

#[tokio::test]
async fn the_loop_speaks_anthropic_messages() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let overloaded = (
        529,
        Some("0"),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let (script, addr) = serve(vec![
        anthropic_tool_use(&[
            ("toolu_1", &ok, json!({})),
            ("toolu_2", &huge, json!({"bytes": 3})),
        ]),
        overloaded,
        anthropic_answer("done"),
    ])
    .await;
    let backend = AnthropicBackend::new(AnthropicConfig {
        base_url: format!("http://{addr}"),
        model: "scripted".into(),
        api_key: Some("sk-ant-test".into()),
        max_tokens: 1024,
        timeout: Duration::from_secs(10),
        max_retries: 2,
        stream: false,
    });
    let mut messages = vec![ChatMessage::system("be brief"), ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend,
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("done"));
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (80, 13)
    );
    assert_history_valid(&messages);

    let requests = script.requests.lock().clone();
    let first = &requests[0];
    assert_eq!(first["system"], "be brief");
    assert_eq!(first["header:x-api-key"], "sk-ant-test");
    assert_eq!(first["header:anthropic-version"], "2023-06-01");
    assert!(first["tools"][0]["input_schema"].is_object());
    // After the tool turn: the assistant's tool_use blocks, then ONE user
    // message with both tool_result blocks.
    let follow_up = &requests[2]["messages"];
    let assistant = &follow_up[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][2]["input"], json!({"bytes": 3}));
    let results = &follow_up[2];
    assert_eq!(results["role"], "user");
    assert_eq!(results["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(results["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(results["content"][0]["content"], "ok");
    assert_eq!(results["content"][1]["content"], "xxx");
    f.connections.shutdown().await;
}

/// An event stream body: each value a `data:` event (an optional event name
/// first), then `[DONE]` for OpenAI.
fn sse(events: &[(Option<&str>, Value)], done: bool) -> Step {
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

#[tokio::test]
async fn streamed_tool_call_deltas_are_assembled_openai() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let chunk = |delta: Value| {
        (
            None,
            json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
        )
    };
    let first = sse(
        &[
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_s1", "type": "function", "function": {"name": ok, "arguments": ""}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_s2", "type": "function", "function": {"name": huge, "arguments": "{\"bytes\""}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})),
            chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": ": 4}"}}]})),
            (
                None,
                json!({"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 6}}),
            ),
        ],
        true,
    );
    let second = sse(
        &[
            chunk(json!({"role": "assistant", "content": "stream"})),
            chunk(json!({"content": "ed done"})),
            (
                None,
                json!({"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 2}}),
            ),
        ],
        true,
    );
    let (script, addr) = serve(vec![first, second]).await;
    let backend = OpenAiBackend::new(OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        model: "scripted".into(),
        api_key: None,
        timeout: Duration::from_secs(10),
        max_retries: 0,
        stream: true,
    });
    let mut messages = vec![ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend,
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("streamed done"));
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (32, 8)
    );
    assert_history_valid(&messages);
    assert_eq!(messages[1].tool_calls[1].arguments, "{\"bytes\": 4}");
    let requests = script.requests.lock().clone();
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(requests[0]["stream_options"]["include_usage"], true);
    let tool_texts: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(tool_texts, vec!["ok", "xxxx"]);
    f.connections.shutdown().await;
}

#[tokio::test]
async fn streamed_tool_use_is_assembled_anthropic() {
    let f = fixture();
    let huge = offered_name("mb", "huge");
    let first = sse(
        &[
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 40, "output_tokens": 1}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_s", "name": huge, "input": {}}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"by"}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "tes\": 2}"}}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 1}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 15}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ],
        false,
    );
    let second = sse(
        &[
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 60, "output_tokens": 1}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "two x"}}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ],
        false,
    );
    let (script, addr) = serve(vec![first, second]).await;
    let backend = AnthropicBackend::new(AnthropicConfig {
        base_url: format!("http://{addr}"),
        model: "scripted".into(),
        api_key: None,
        max_tokens: 256,
        timeout: Duration::from_secs(10),
        max_retries: 0,
        stream: true,
    });
    let mut messages = vec![ChatMessage::user("go")];
    let outcome = run_tool_loop(
        &backend,
        &f.router,
        &f.task,
        &f.session,
        &mut messages,
        limits(),
    )
    .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("two x"));
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (100, 18)
    );
    assert_history_valid(&messages);
    let requests = script.requests.lock().clone();
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(
        requests[1]["messages"][1]["content"][1]["input"],
        json!({"bytes": 2})
    );
    assert_eq!(requests[1]["messages"][2]["content"][0]["content"], "xx");
    f.connections.shutdown().await;
}
