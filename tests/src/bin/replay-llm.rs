//! An OpenAI-compatible chat completions server that replays a recorded
//! conversation, for running Spear offline (the README's main job when no
//! model endpoint is named) and in end-to-end tests.
//!
//! `replay-llm --recording FILE --listen 127.0.0.1:0 --ready-file F`
//!
//! The recording is `{"turns": [<chat.completion message>, ...]}`. The
//! request's turn is the number of assistant messages it already holds, so
//! the same recording serves any number of runs at once. In a replayed
//! message, `${NAME}` is replaced with the environment variable NAME and
//! `{{last_tool_result}}` with the content of the request's last tool
//! message: the tool calls and their results are real, only the model's
//! words are recorded. Answers are non-streaming, or streamed as SSE chunks
//! when the request asks for `"stream": true`.
//! `--delay-ms N` waits before each answer, like a model would. With
//! `"repeat_last": true` in the recording, turns past its end replay the
//! last one (a model that never stops calling tools).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Json;
use serde_json::{json, Value};

struct Replay {
    turns: Vec<Value>,
    repeat_last: bool,
    delay: Duration,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let mut recording = None;
    let mut listen: SocketAddr = "127.0.0.1:0".parse()?;
    let mut ready_file = None;
    let mut delay = Duration::ZERO;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--recording" => recording = Some(value()?),
            "--listen" => listen = value()?.parse().context("--listen is not host:port")?,
            "--ready-file" => ready_file = Some(value()?),
            "--delay-ms" => delay = Duration::from_millis(value()?.parse()?),
            other => bail!("unknown argument {other}; see the doc comment of replay-llm"),
        }
    }
    let path = recording.context("--recording FILE is required")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let file: Value = serde_json::from_str(&text).with_context(|| format!("{path} is not JSON"))?;
    let turns = file["turns"]
        .as_array()
        .filter(|t| !t.is_empty())
        .with_context(|| format!("{path}: \"turns\" must be a non-empty array"))?
        .clone();
    let repeat_last = file["repeat_last"].as_bool().unwrap_or(false);
    let replay = Arc::new(Replay {
        turns,
        repeat_last,
        delay,
    });
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(complete))
        .route("/chat/completions", post(complete))
        // Providers take long contexts; so does the replay (axum's default
        // limit is 2 MB).
        .layer(axum::extract::DefaultBodyLimit::max(256 << 20))
        .with_state(replay);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    eprintln!("replay-llm: replaying {path} on http://{addr}/v1");
    if let Some(ready) = ready_file {
        // Written whole, then renamed: a reader never sees a partial file.
        let tmp = format!("{ready}.tmp");
        std::fs::write(&tmp, format!("http://{addr}/v1"))?;
        std::fs::rename(&tmp, &ready)?;
    }
    axum::serve(listener, app).await?;
    Ok(())
}

async fn complete(State(replay): State<Arc<Replay>>, Json(body): Json<Value>) -> Response {
    tokio::time::sleep(replay.delay).await;
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
    let recorded = match replay.turns.get(turn) {
        None if replay.repeat_last => replay.turns.last(),
        found => found,
    };
    let Some(recorded) = recorded else {
        let error = json!({"error": {"message": format!("the recording has {} turns; this request is turn {}", replay.turns.len(), turn + 1), "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, Json(error)).into_response();
    };
    let last_tool = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let message = fill(recorded, &last_tool);
    let model = body["model"].as_str().unwrap_or("replay").to_string();
    let finish = if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    if body["stream"] == true {
        return stream(&model, &message, finish, usage);
    }
    Json(json!({
        "id": format!("replay-{turn}"), "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }))
    .into_response()
}

/// The message as SSE chunks: content, then each tool call, then usage.
fn stream(model: &str, message: &Value, finish: &str, usage: Value) -> Response {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "replay", "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    if let Some(text) = message["content"].as_str() {
        events.push(chunk(json!({"content": text}), Value::Null));
    }
    for (index, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": call["function"]}]}),
            Value::Null,
        ));
    }
    events.push(chunk(json!({}), json!(finish)));
    events.push(json!({"id": "replay", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage}));
    let mut body = String::new();
    for event in events {
        body.push_str(&format!("data: {event}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], body).into_response()
}

/// Replaces `${NAME}` and `{{last_tool_result}}` in every string.
fn fill(value: &Value, last_tool: &str) -> Value {
    match value {
        Value::String(s) => Value::String(expand(s, last_tool)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, last_tool)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, last_tool)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn expand(text: &str, last_tool: &str) -> String {
    let text = text.replace("{{last_tool_result}}", last_tool);
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.push_str(&std::env::var(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
