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
            tool_search(body, request.header("anthropic-beta"))?;
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
    "output_config",
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

/// A number in `low..=high` (`low` itself only when `low_ok`), when present.
fn in_range(body: &Value, key: &str, low: f64, high: f64, low_ok: bool) -> Result<(), String> {
    let Some(value) = body.get(key) else {
        return Ok(());
    };
    match value.as_f64() {
        Some(n) if (n > low || (low_ok && n == low)) && n <= high => Ok(()),
        _ => Err(format!(
            "{key}: Input should be a number from {low} to {high}, got {value}"
        )),
    }
}

fn positive_integer(body: &Value, key: &str) -> Result<(), String> {
    match body.get(key) {
        Some(v) if v.as_u64().is_none_or(|n| n == 0) => {
            Err(format!("{key}: a positive integer is required, got {v}"))
        }
        _ => Ok(()),
    }
}

/// The names of the request's tools, at `name_at` in each.
fn tool_names<'a>(body: &'a Value, name_at: &str) -> Vec<&'a str> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer(name_at).and_then(Value::as_str))
        .collect()
}

/// The request params of chat completions, as the API checks them.
fn openai_params(body: &Value, messages: &[Value]) -> Result<(), String> {
    in_range(body, "temperature", 0.0, 2.0, true)?;
    in_range(body, "top_p", 0.0, 1.0, false)?;
    positive_integer(body, "max_tokens")?;
    if let Some(seed) = body.get("seed").filter(|s| !s.is_i64()) {
        return Err(format!("seed: Input should be a valid integer, got {seed}"));
    }
    if let Some(stop) = body.get("stop") {
        let ok = stop.is_string()
            || stop
                .as_array()
                .is_some_and(|a| a.len() <= 4 && a.iter().all(Value::is_string));
        if !ok {
            return Err(format!(
                "stop: a string or up to 4 strings is required, got {stop}"
            ));
        }
    }
    let names = tool_names(body, "/function/name");
    if let Some(choice) = body.get("tool_choice") {
        if names.is_empty() {
            return Err("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.".into());
        }
        let ok = match choice.as_str() {
            Some(mode) => ["none", "auto", "required"].contains(&mode),
            None => {
                choice["type"] == "function"
                    && choice["function"]["name"]
                        .as_str()
                        .is_some_and(|n| names.contains(&n))
            }
        };
        if !ok {
            return Err(format!("tool_choice: 'none', 'auto', 'required' or a function among the tools is required, got {choice}"));
        }
    }
    if let Some(parallel) = body.get("parallel_tool_calls") {
        if names.is_empty() {
            return Err("Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.".into());
        }
        if !parallel.is_boolean() {
            return Err("parallel_tool_calls: a boolean is required".into());
        }
    }
    if let Some(format) = body.get("response_format") {
        match format["type"].as_str() {
            Some("text") => {}
            Some("json_object") => {
                let says_json = messages
                    .iter()
                    .any(|m| m.to_string().to_lowercase().contains("json"));
                if !says_json {
                    return Err("'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.".into());
                }
            }
            Some("json_schema") => {
                let schema = &format["json_schema"];
                let name_ok = schema["name"].as_str().is_some_and(tool_name_ok);
                if !name_ok || !schema["schema"].is_object() {
                    return Err(format!("response_format.json_schema: a name matching ^[a-zA-Z0-9_-]{{1,64}}$ and a schema object are required, got {schema}"));
                }
            }
            _ => return Err(format!("response_format.type: 'text', 'json_object' or 'json_schema' is required, got {format}")),
        }
    }
    Ok(())
}

/// The request params of the messages API, as the API checks them.
fn anthropic_params(body: &Value) -> Result<(), String> {
    in_range(body, "temperature", 0.0, 1.0, true)?;
    in_range(body, "top_p", 0.0, 1.0, false)?;
    positive_integer(body, "top_k")?;
    if let Some(stop) = body.get("stop_sequences") {
        if !stop
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
        {
            return Err("stop_sequences: Input should be a valid list of strings".into());
        }
    }
    let names = tool_names(body, "/name");
    if let Some(choice) = body.get("tool_choice") {
        if names.is_empty() {
            return Err(
                "tool_choice: tool_choice may only be specified while providing tools".into(),
            );
        }
        let ok = match choice["type"].as_str() {
            Some("auto" | "any" | "none") => true,
            Some("tool") => choice["name"].as_str().is_some_and(|n| names.contains(&n)),
            _ => false,
        };
        let parallel_ok = choice
            .get("disable_parallel_tool_use")
            .is_none_or(|d| d.is_boolean() && choice["type"] != "none");
        if !ok || !parallel_ok {
            return Err(format!("tool_choice: {{\"type\": \"auto\"|\"any\"|\"none\"}} or {{\"type\": \"tool\", \"name\"}} among the tools is required, got {choice}"));
        }
    }
    if let Some(config) = body.get("output_config") {
        let format = &config["format"];
        if format["type"] != "json_schema" || format["schema"]["type"] != "object" {
            return Err(format!("output_config.format: {{\"type\": \"json_schema\", \"schema\": {{\"type\": \"object\"}}}} is required, got {config}"));
        }
    }
    Ok(())
}

fn openai(body: &Value, messages: &[Value]) -> Result<(), String> {
    known_fields(body, OPENAI_FIELDS)?;
    openai_params(body, messages)?;
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
    anthropic_params(body)?;
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: a positive integer is required".into());
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let name = tool["name"].as_str().unwrap_or_default();
        if tool.get("type").is_some() {
            // A server tool (tool search): checked in `tool_search`.
            continue;
        }
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

/// The server-side tool search tools Anthropic has.
const TOOL_SEARCH_TYPES: &[&str] = &[
    "tool_search_tool_bm25_20251119",
    "tool_search_tool_regex_20251119",
];
/// The beta its requests name.
const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";

/// Deferred tools and the tool search tool, as the messages API checks
/// them; and every server-side search the history replays: its result
/// after its `server_tool_use`, its references among the deferred tools.
fn tool_search(body: &Value, beta: Option<&str>) -> Result<(), String> {
    let tools: Vec<&Value> = body["tools"].as_array().into_iter().flatten().collect();
    let mut search_tools = 0;
    let mut deferred: BTreeSet<&str> = BTreeSet::new();
    for (i, tool) in tools.iter().enumerate() {
        if let Some(kind) = tool.get("type") {
            if !kind
                .as_str()
                .is_some_and(|k| TOOL_SEARCH_TYPES.contains(&k))
                || !tool["name"].as_str().is_some_and(tool_name_ok)
            {
                return Err(format!(
                    "tools.{i}: a server tool needs a known type and a name, got {tool}"
                ));
            }
            if tool.get("defer_loading").is_some_and(|d| d != false) {
                return Err(format!(
                    "tools.{i}: the tool search tool cannot be deferred"
                ));
            }
            search_tools += 1;
            continue;
        }
        match tool.get("defer_loading") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => {
                deferred.insert(tool["name"].as_str().unwrap_or_default());
            }
            Some(other) => {
                return Err(format!(
                    "tools.{i}.defer_loading: a boolean is required, got {other}"
                ))
            }
        }
    }
    if !deferred.is_empty() && search_tools == 0 {
        return Err(
            "tools: deferred tools (defer_loading) need a tool search tool in the request".into(),
        );
    }
    if search_tools > 0 && !beta.is_some_and(|b| b.split(',').any(|b| b.trim() == TOOL_SEARCH_BETA))
    {
        return Err(format!(
            "anthropic-beta: the tool search tool needs the {TOOL_SEARCH_BETA} beta"
        ));
    }
    for (i, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        let mut searched: BTreeSet<String> = BTreeSet::new();
        for block in &blocks {
            match block["type"].as_str() {
                Some("server_tool_use") => {
                    if message["role"] != "assistant" || search_tools == 0 {
                        return Err(format!("messages.{i}: server_tool_use blocks are the assistant's, with a tool search tool in the request"));
                    }
                    searched.insert(block["id"].as_str().unwrap_or_default().to_string());
                }
                Some("tool_search_tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if !searched.contains(id) {
                        return Err(format!("messages.{i}: tool_search_tool_result '{id}' does not follow its server_tool_use"));
                    }
                    let references = block["content"]["tool_references"]
                        .as_array()
                        .into_iter()
                        .flatten();
                    for reference in references {
                        let name = reference["tool_name"].as_str().unwrap_or_default();
                        if !deferred.contains(name) {
                            return Err(format!("messages.{i}: tool reference '{name}' is not a deferred tool of this request"));
                        }
                    }
                }
                _ => {}
            }
        }
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
