//! OpenAI chat completions: a turn as a `chat.completion` body or as
//! `chat.completion.chunk` events ending in a `finish_reason` chunk, the
//! usage chunk when `stream_options.include_usage` asks for it, and
//! `data: [DONE]`.

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{error_response, event_stream, halves, Call, Dialect, Turn};
use super::{COMPLETION_TOKENS, PROMPT_TOKENS};

pub fn render(turn: &Turn, request: &Value, stream: bool) -> Response {
    let (text, calls, finish) = match turn {
        Turn::Answer(text) => (text.as_str(), vec![], "stop"),
        Turn::ToolCalls { text, calls } => (text.as_str(), calls.clone(), "tool_calls"),
        Turn::Truncated { text, call } => {
            let calls = call.iter().map(|(call, at)| call.cut(*at)).collect();
            (text.as_str(), calls, "length")
        }
        Turn::Error {
            status,
            retry_after,
            message,
        } => return error_response(Dialect::OpenAi, *status, *retry_after, message),
        Turn::FailMidStream { text, message } => {
            if !stream {
                return error_response(Dialect::OpenAi, 500, None, message);
            }
            return event_stream(failed_stream(request, text, message));
        }
        Turn::NativeSearch { .. } => {
            return error_response(
                Dialect::OpenAi,
                500,
                None,
                "the script plays Anthropic's server-side tool search to an OpenAI request",
            )
        }
    };
    let model = request["model"].as_str().unwrap_or("scripted");
    if stream {
        return event_stream(chunks(request, model, text, &calls, finish));
    }
    let mut message = json!({"role": "assistant", "content": (!text.is_empty()).then_some(text), "refusal": null});
    if !calls.is_empty() {
        message["tool_calls"] = calls.iter().map(call_json).collect();
    }
    axum::Json(json!({
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage(),
    }))
    .into_response()
}

pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

fn usage() -> Value {
    json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS, "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS})
}

fn call_json(call: &Call) -> Value {
    json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
}

struct Chunks<'a> {
    model: &'a str,
    with_usage: bool,
    body: String,
}

impl Chunks<'_> {
    fn push(&mut self, delta: Value, finish: Option<&str>) {
        let mut chunk = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        if self.with_usage {
            chunk["usage"] = Value::Null;
        }
        self.body.push_str(&format!("data: {chunk}\n\n"));
    }

    fn text(&mut self, text: &str) {
        self.push(json!({"role": "assistant", "content": ""}), None);
        for half in halves(text).into_iter().filter(|h| !h.is_empty()) {
            self.push(json!({"content": half}), None);
        }
    }
}

fn chunks(request: &Value, model: &str, text: &str, calls: &[Call], finish: &str) -> String {
    let mut out = Chunks {
        model,
        with_usage: request["stream_options"]["include_usage"] == true,
        body: String::new(),
    };
    out.text(text);
    for (index, call) in calls.iter().enumerate() {
        out.push(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
            None,
        );
        for half in halves(&call.arguments) {
            out.push(
                json!({"tool_calls": [{"index": index, "function": {"arguments": half}}]}),
                None,
            );
        }
    }
    out.push(json!({}), Some(finish));
    if out.with_usage {
        let chunk = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage()});
        out.body.push_str(&format!("data: {chunk}\n\n"));
    }
    out.body.push_str("data: [DONE]\n\n");
    out.body
}

/// A stream that answers `text`, then carries an error object and ends
/// without `[DONE]`, as the API does when it fails mid-answer.
fn failed_stream(request: &Value, text: &str, message: &str) -> String {
    let mut out = Chunks {
        model: request["model"].as_str().unwrap_or("scripted"),
        with_usage: false,
        body: String::new(),
    };
    out.text(text);
    out.body
        .push_str(&format!("data: {}\n\n", error_body(500, message)));
    out.body
}
