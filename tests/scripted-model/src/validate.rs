//! The rules each provider enforces on a request, checked as the provider
//! would, with a sentence close to the provider's own when one is broken.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Dialect, Request};

pub fn request(request: &Request) -> Result<(), String> {
    let body = &request.body;
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Err("model: a non-empty string is required".into());
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("messages: a non-empty array is required".into());
    };
    match request.dialect {
        Dialect::OpenAi => openai(body, messages),
        Dialect::Anthropic => {
            if request.header("anthropic-version").is_none() {
                return Err("anthropic-version: header is required".into());
            }
            anthropic(body, messages)
        }
    }
}

const OPENAI_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "response_format",
    "n",
    "user",
    "frequency_penalty",
    "presence_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "metadata",
    "store",
    "reasoning_effort",
    "service_tier",
];

const ANTHROPIC_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "thinking",
    "service_tier",
];

fn known_fields(body: &Value, known: &[&str]) -> Result<(), String> {
    let fields = body.as_object().map(|o| o.keys()).into_iter().flatten();
    match fields.into_iter().find(|k| !known.contains(&k.as_str())) {
        Some(field) => Err(format!("{field}: Extra inputs are not permitted")),
        None => Ok(()),
    }
}

/// `^[a-zA-Z0-9_-]{1,64}$`, both providers' rule for tool names.
fn tool_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn openai(body: &Value, messages: &[Value]) -> Result<(), String> {
    known_fields(body, OPENAI_FIELDS)?;
    if body.get("stream_options").is_some() && body["stream"] != true {
        return Err(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.".into(),
        );
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let name = tool["function"]["name"].as_str().unwrap_or_default();
        if tool["type"] != "function" || !tool_name_ok(name) {
            return Err(format!("tools[{i}]: a function with a name matching ^[a-zA-Z0-9_-]{{1,64}}$ is required, got {tool}"));
        }
        if tool["function"]
            .get("parameters")
            .is_some_and(|p| !p.is_object())
        {
            return Err(format!(
                "tools[{i}].function.parameters: an object is required"
            ));
        }
    }
    // Ids asked by the last assistant message and not yet answered.
    let mut open: Option<BTreeSet<String>> = None;
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "tool" {
            if let Some(missing) = open.take().filter(|ids| !ids.is_empty()) {
                return Err(format!("messages[{i}]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}", joined(&missing)));
            }
        }
        match role {
            "system" | "developer" | "user" => {}
            "assistant" => {
                let mut ids = BTreeSet::new();
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or_default();
                    if id.is_empty()
                        || call["type"] != "function"
                        || !call["function"]["arguments"].is_string()
                    {
                        return Err(format!("messages[{i}].tool_calls: each needs an id, type \"function\" and string arguments, got {call}"));
                    }
                    ids.insert(id.to_string());
                }
                if message["content"].is_null() && ids.is_empty() {
                    return Err(format!(
                        "messages[{i}]: an assistant message needs content or tool_calls"
                    ));
                }
                open = Some(ids);
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let answered = open.as_mut().is_some_and(|ids| ids.remove(id));
                if !answered {
                    return Err(format!("messages[{i}]: Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id {id:?})"));
                }
            }
            other => return Err(format!("messages[{i}].role: unknown role {other:?}")),
        }
    }
    match open.filter(|ids| !ids.is_empty()) {
        Some(missing) => Err(format!("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}", joined(&missing))),
        None => Ok(()),
    }
}

fn anthropic(body: &Value, messages: &[Value]) -> Result<(), String> {
    known_fields(body, ANTHROPIC_FIELDS)?;
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: a positive integer is required".into());
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let name = tool["name"].as_str().unwrap_or_default();
        if !tool_name_ok(name) || tool["input_schema"]["type"] != "object" {
            return Err(format!("tools.{i}: a name matching ^[a-zA-Z0-9_-]{{1,64}}$ and an input_schema of type object are required"));
        }
    }
    if messages[0]["role"] != "user" {
        return Err("messages: the first message must use the \"user\" role".into());
    }
    let mut asked: BTreeSet<String> = BTreeSet::new();
    for (i, message) in messages.iter().enumerate() {
        let blocks = blocks(message).map_err(|e| format!("messages.{i}: {e}"))?;
        if blocks.is_empty() && i + 1 < messages.len() {
            return Err(format!("messages.{i}: all messages must have non-empty content except for the optional final assistant message"));
        }
        let kinds = |kind: &str| -> Vec<String> {
            blocks
                .iter()
                .filter(|b| b["type"] == kind)
                .map(|b| {
                    b[if kind == "tool_use" {
                        "id"
                    } else {
                        "tool_use_id"
                    }]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
                })
                .collect()
        };
        match message["role"].as_str() {
            Some("assistant") => {
                if !asked.is_empty() {
                    return Err(format!("messages.{i}: tool_use ids were found without tool_result blocks immediately after: {}. Each tool_use block must have a corresponding tool_result block in the next message.", joined(&asked)));
                }
                asked = kinds("tool_use").into_iter().collect();
            }
            Some("user") => {
                let answered: BTreeSet<String> = kinds("tool_result").into_iter().collect();
                if let Some(stray) = answered.difference(&asked).next() {
                    return Err(format!("messages.{i}.content: unexpected tool_use_id found in tool_result blocks: {stray}. Each tool_result block must have a corresponding tool_use block in the previous message."));
                }
                let missing: BTreeSet<String> = asked.difference(&answered).cloned().collect();
                if !missing.is_empty() {
                    return Err(format!("messages.{i}: tool_use ids were found without tool_result blocks immediately after: {}. Each tool_use block must have a corresponding tool_result block in the next message.", joined(&missing)));
                }
                asked.clear();
            }
            other => {
                return Err(format!(
                    "messages.{i}.role: Input should be 'user' or 'assistant', got {other:?}"
                ))
            }
        }
    }
    if !asked.is_empty() {
        return Err(format!(
            "the last message asks for tools and nothing answers them: {}",
            joined(&asked)
        ));
    }
    Ok(())
}

/// A message's content blocks (a string is one text block); text blocks
/// must not be empty.
fn blocks(message: &Value) -> Result<Vec<Value>, String> {
    let blocks = match &message["content"] {
        Value::String(text) => vec![serde_json::json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => return Err("content: a string or an array of blocks is required".into()),
    };
    for block in &blocks {
        if block["type"] == "text" && block["text"].as_str().is_none_or(str::is_empty) {
            return Err("text content blocks must be non-empty".into());
        }
    }
    Ok(blocks)
}

fn joined(ids: &BTreeSet<String>) -> String {
    ids.iter().cloned().collect::<Vec<_>>().join(", ")
}
