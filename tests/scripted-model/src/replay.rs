//! A recorded conversation, replayed by position: the request's turn is the
//! number of assistant messages it already holds, so one recording serves
//! any number of runs at once.
//!
//! The recording is `{"turns": [<assistant message>, ...], "repeat_last":
//! bool}` with OpenAI-shaped messages. In a replayed message, `${NAME}` is
//! the environment variable NAME and `{{last_tool_result}}` the text of the
//! request's last tool result: the tool calls and their results are real,
//! only the model's words are recorded; `{{tool_result:ID}}` is the result
//! of the call with that id. With `repeat_last`, turns past the end replay
//! the last one (a model that never stops calling tools).

use serde_json::Value;

use super::{Call, Dialect, Request, Turn};

#[derive(Debug, Clone)]
pub struct Recording {
    turns: Vec<Value>,
    repeat_last: bool,
}

impl Recording {
    /// Reads a recording; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Recording, String> {
        let file: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let turns = file["turns"]
            .as_array()
            .filter(|t| !t.is_empty())
            .ok_or("\"turns\" must be a non-empty array")?
            .clone();
        Ok(Recording {
            turns,
            repeat_last: file["repeat_last"].as_bool().unwrap_or(false),
        })
    }

    /// The turn that answers `request`; past the end of a recording that
    /// does not repeat, an error turn saying so.
    pub fn turn_for(&self, request: &Request) -> Turn {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
        let recorded = match self.turns.get(turn) {
            None if self.repeat_last => self.turns.last(),
            found => found,
        };
        let Some(recorded) = recorded else {
            let message = format!(
                "the recording has {} turns; this request is turn {}",
                self.turns.len(),
                turn + 1
            );
            return Turn::error(400, None, &message);
        };
        let results = tool_results(request.dialect, &messages);
        let message = fill(recorded, &results);
        let text = message["content"].as_str().unwrap_or_default().to_string();
        let calls: Vec<Call> = message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|call| Call {
                id: call["id"].as_str().unwrap_or_default().to_string(),
                name: call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                arguments: call["function"]["arguments"]
                    .as_str()
                    .unwrap_or("{}")
                    .to_string(),
            })
            .collect();
        if calls.is_empty() {
            Turn::Answer(text)
        } else {
            Turn::ToolCalls { text, calls }
        }
    }
}

/// Every tool result of the request in either dialect, in order, as
/// `(tool_call_id, text)`.
fn tool_results(dialect: Dialect, messages: &[Value]) -> Vec<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    match dialect {
        Dialect::OpenAi => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| (text(&m["tool_call_id"]), text(&m["content"])))
            .collect(),
        Dialect::Anthropic => messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| (text(&b["tool_use_id"]), text(&b["content"])))
            .collect(),
    }
}

/// Replaces `${NAME}`, `{{last_tool_result}}` and `{{tool_result:ID}}` in
/// every string.
fn fill(value: &Value, results: &[(String, String)]) -> Value {
    match value {
        Value::String(s) => Value::String(expand(s, results)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, results)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, results)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn expand(text: &str, results: &[(String, String)]) -> String {
    let last = results.last().map(|(_, t)| t.as_str()).unwrap_or_default();
    let mut text = text.replace("{{last_tool_result}}", last);
    for (id, result) in results {
        text = text.replace(&format!("{{{{tool_result:{id}}}}}"), result);
    }
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
