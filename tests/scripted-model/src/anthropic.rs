//! Anthropic messages: a turn as a `message` body or as the event stream
//! (`message_start`, `ping`, content blocks with `text_delta` and
//! `input_json_delta`, `message_delta` with the `stop_reason` and output
//! tokens, `message_stop`; an `error` event when it fails mid-answer), and
//! the blocks of its server-side tool search (`server_tool_use`, then
//! `tool_search_tool_result` with `tool_reference`s).

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{error_response, event_stream, halves, Call, Dialect, Turn};
use super::{COMPLETION_TOKENS, PROMPT_TOKENS};

pub fn render(turn: &Turn, request: &Value, stream: bool) -> Response {
    let (text, calls, stop) = match turn {
        Turn::Answer(text) => (text.as_str(), vec![], "end_turn"),
        Turn::ToolCalls { text, calls } => (text.as_str(), calls.clone(), "tool_use"),
        Turn::Truncated { text, call } => {
            let calls = call.iter().map(|(call, at)| call.cut(*at)).collect();
            (text.as_str(), calls, "max_tokens")
        }
        Turn::Error {
            status,
            retry_after,
            message,
        } => return error_response(Dialect::Anthropic, *status, *retry_after, message),
        Turn::FailMidStream { text, message } => {
            if !stream {
                return error_response(Dialect::Anthropic, 529, None, message);
            }
            let mut events = Events::start(request);
            events.text_block(0, text);
            events.push(
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
            );
            return event_stream(events.body);
        }
        Turn::NativeSearch {
            query,
            found,
            calls,
        } => return native_search(request, query, found, calls, stream),
    };
    if stream {
        let mut events = Events::start(request);
        let first = usize::from(!text.is_empty());
        if !text.is_empty() {
            events.text_block(0, text);
        }
        for (i, call) in calls.iter().enumerate() {
            events.tool_block(first + i, call);
        }
        events.push(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": COMPLETION_TOKENS}}),
        );
        events.push("message_stop", json!({"type": "message_stop"}));
        return event_stream(events.body);
    }
    let mut content: Vec<Value> = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &calls {
        content.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input()}),
        );
    }
    axum::Json(json!({
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model(request),
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS},
    }))
    .into_response()
}

/// A server-side tool search: what a provider answers, finding only the
/// tools of `found` that the request defers.
fn native_search(
    request: &Value,
    query: &str,
    found: &[String],
    calls: &[Call],
    stream: bool,
) -> Response {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let search_tool = tools
        .iter()
        .find(|t| {
            t["type"]
                .as_str()
                .is_some_and(|k| k.starts_with("tool_search_tool_"))
        })
        .and_then(|t| t["name"].as_str())
        .unwrap_or("tool_search_tool_bm25");
    let deferred = |name: &str| {
        tools
            .iter()
            .any(|t| t["name"] == name && t["defer_loading"] == true)
    };
    let references: Vec<Value> = found
        .iter()
        .filter(|name| deferred(name))
        .map(|name| json!({"type": "tool_reference", "tool_name": name}))
        .collect();
    let mut content = vec![
        json!({"type": "server_tool_use", "id": "srvtoolu_scripted", "name": search_tool, "input": {"query": query}}),
        json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_scripted",
               "content": {"type": "tool_search_tool_search_result", "tool_references": references}}),
    ];
    for call in calls {
        content.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input()}),
        );
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    if stream {
        let mut events = Events::start(request);
        // The search's input streams as JSON deltas; its result comes
        // whole in its block's start, as the provider sends them.
        let (search, result) = (&content[0], &content[1]);
        let mut opening = search.clone();
        opening["input"] = json!({});
        events.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": opening}),
        );
        for half in halves(&search["input"].to_string()) {
            events.push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": half}}),
            );
        }
        events.stop(0);
        events.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": result}),
        );
        events.stop(1);
        for (i, call) in calls.iter().enumerate() {
            events.tool_block(2 + i, call);
        }
        events.push(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": COMPLETION_TOKENS}}),
        );
        events.push("message_stop", json!({"type": "message_stop"}));
        return event_stream(events.body);
    }
    axum::Json(json!({
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model(request),
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS,
                  "server_tool_use": {"tool_search_requests": 1}},
    }))
    .into_response()
}

pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn model(request: &Value) -> &str {
    request["model"].as_str().unwrap_or("scripted")
}

struct Events {
    body: String,
}

impl Events {
    /// `message_start` (input tokens, one output token so far) and a ping.
    fn start(request: &Value) -> Events {
        let mut events = Events {
            body: String::new(),
        };
        events.push(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message", "role": "assistant",
                "content": [], "model": model(request), "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1}}}),
        );
        events.push("ping", json!({"type": "ping"}));
        events
    }

    fn push(&mut self, name: &str, data: Value) {
        self.body
            .push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }

    fn text_block(&mut self, index: usize, text: &str) {
        self.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        );
        for half in halves(text).into_iter().filter(|h| !h.is_empty()) {
            self.push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": half}}),
            );
        }
        self.stop(index);
    }

    fn tool_block(&mut self, index: usize, call: &Call) {
        self.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        );
        for half in halves(&call.arguments) {
            self.push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": half}}),
            );
        }
        self.stop(index);
    }

    fn stop(&mut self, index: usize) {
        self.push(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
}
