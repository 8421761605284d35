//! Anthropic messages API, streaming or not.
//!
//! Differences from the OpenAI shape handled here: the system prompt is a
//! top-level field; tool calls are `tool_use` content blocks with a JSON
//! `input`; tool results are `tool_result` blocks in a `user` message, all the
//! results of one turn in one message.
//!
//! Native tool search (`tool_search = "native"`): deferred tools are sent
//! with `defer_loading` next to the BM25 tool search tool, under the
//! beta that enables it; an answer's `server_tool_use` and
//! `tool_search_tool_result` blocks are read into [`ProviderSearch`]es and
//! the answer's blocks kept as they came, to be sent back as they are.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use spear_guest::request::{RequestParams, ResponseFormat, ToolChoice, ToolMode};

use super::backend::LlmBackend;
use super::request::{ChatRequest, Unsupported};
use super::retry::{json as read_json, send};
use super::stream::{read_stream, Dialect};
use super::types::{ChatMessage, LlmError, ProviderSearch, Reply, Role, ToolCall, Usage};

const API_VERSION: &str = "2023-06-01";
/// The server-side tool search tool the node asks for, and its name.
const SEARCH_TOOL_TYPE: &str = "tool_search_tool_bm25_20251119";
const SEARCH_TOOL_NAME: &str = "tool_search_tool_bm25";
/// The beta under which the messages API takes deferred tools.
const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";

/// Where and how to reach the provider; the key never appears in errors.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// e.g. `https://api.anthropic.com` (the path `/v1/messages` is added).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub max_tokens: u32,
    pub timeout: Duration,
    pub max_retries: u32,
    /// Ask for a streamed answer (tool-call deltas are assembled here).
    pub stream: bool,
    /// Search a session's tools on the provider's side (`tool_search =
    /// "native"`).
    pub native_tool_search: bool,
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

pub struct AnthropicBackend {
    config: AnthropicConfig,
    http: reqwest::Client,
}

impl AnthropicBackend {
    pub fn new(config: AnthropicConfig) -> Self {
        Self {
            config,
            http: crate::http_client::http_client(),
        }
    }
}

/// The request body for `request`, on `model` with `max_tokens` unless
/// the session sets its own.
pub fn request_body(model: &str, max_tokens: u32, request: &ChatRequest<'_>) -> Value {
    let (messages, tools) = (request.messages, request.tools);
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref())
        .collect();
    let mut out: Vec<Value> = Vec::new();
    for m in messages.iter().filter(|m| m.role != Role::System) {
        match m.role {
            Role::User => out.push(json!({"role": "user", "content": [{"type": "text", "text": m.content.clone().unwrap_or_default()}]})),
            Role::Assistant => {
                // An answer with the provider's own search blocks goes back
                // exactly as it came.
                let kept = m.provider_content.as_deref().and_then(|c| serde_json::from_str::<Value>(c).ok());
                if let Some(content) = kept.filter(Value::is_array) {
                    out.push(json!({"role": "assistant", "content": content}));
                    continue;
                }
                let mut blocks: Vec<Value> = Vec::new();
                if let Some(text) = m.content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in &m.tool_calls {
                    let input: Value = serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                // An empty answer is left out: the API refuses empty content.
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Role::Tool => {
                let block = json!({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content.clone().unwrap_or_default()});
                // All results of one turn go in one user message.
                let merged = out.last_mut().filter(|last| {
                    last["role"] == "user"
                        && last["content"].as_array().is_some_and(|c| c.iter().all(|b| b["type"] == "tool_result"))
                });
                match merged.and_then(|last| last["content"].as_array_mut()) {
                    Some(content) => content.push(block),
                    None => out.push(json!({"role": "user", "content": [block]})),
                }
            }
            Role::System => {}
        }
    }
    let max_tokens = request.params.max_tokens.unwrap_or(max_tokens);
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": out});
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !tools.is_empty() {
        let mut wire: Vec<Value> = Vec::with_capacity(tools.len() + 1);
        if request.defers_tools() {
            wire.push(json!({"type": SEARCH_TOOL_TYPE, "name": SEARCH_TOOL_NAME}));
        }
        for t in tools {
            let mut tool =
                json!({"name": t.name, "description": t.description, "input_schema": t.parameters});
            if t.deferred {
                tool["defer_loading"] = json!(true);
            }
            wire.push(tool);
        }
        body["tools"] = Value::Array(wire);
    }
    map_params(&mut body, request);
    body
}

const PROVIDER: &str = "Anthropic messages";

/// Refuses what the messages API has no equivalent for.
fn check_params(params: &RequestParams) -> Result<(), Unsupported> {
    let unsupported = |param, why| {
        Err(Unsupported {
            param,
            provider: PROVIDER,
            why,
        })
    };
    if params.temperature.is_some_and(|t| t > 1.0) {
        return unsupported("temperature", "it takes a temperature from 0 to 1");
    }
    if params.seed.is_some() {
        return unsupported("seed", "the API has no sampling seed; leave seed unset");
    }
    if params.response_format == Some(ResponseFormat::JsonObject) {
        return unsupported(
            "response_format",
            "it has no free-form JSON mode; use json_schema with an object schema",
        );
    }
    Ok(())
}

/// The session's request params in messages-API terms (after
/// [`check_params`]): `stop` is `stop_sequences`; `tool_choice` `required`
/// is `any`, a named tool is `{"type": "tool"}`; `parallel_tool_calls:
/// false` is `disable_parallel_tool_use`; `json_schema` output is
/// `output_config.format`.
fn map_params(body: &mut Value, request: &ChatRequest<'_>) {
    let p = request.params;
    request.write_sampling(body);
    if let Some(stop) = &p.stop {
        body["stop_sequences"] = json!(stop);
    }
    if let Some(ResponseFormat::JsonSchema { json_schema }) = &p.response_format {
        body["output_config"] =
            json!({"format": {"type": "json_schema", "schema": json_schema.schema}});
    }
    if request.tools.is_empty() {
        return;
    }
    let choice = request.tool_choice();
    let none = choice == Some(&ToolChoice::Mode(ToolMode::None));
    let one_at_a_time = p.parallel_tool_calls == Some(false) && !none;
    if choice.is_none() && !one_at_a_time {
        return;
    }
    let mut wire = match choice {
        None | Some(ToolChoice::Mode(ToolMode::Auto)) => json!({"type": "auto"}),
        Some(ToolChoice::Mode(ToolMode::None)) => json!({"type": "none"}),
        Some(ToolChoice::Mode(ToolMode::Required)) => json!({"type": "any"}),
        Some(ToolChoice::Named { name }) => json!({"type": "tool", "name": name}),
    };
    if one_at_a_time {
        wire["disable_parallel_tool_use"] = json!(true);
    }
    body["tool_choice"] = wire;
}

/// Parses a messages API response.
pub fn parse_reply(body: &Value) -> Result<Reply, LlmError> {
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::BadReply("no content".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            Some("tool_use") => {
                let id = block
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if id.is_empty() {
                    return Err(LlmError::BadReply("a tool_use block has no id".into()));
                }
                tool_calls.push(ToolCall {
                    id,
                    name: block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    arguments: block
                        .get("input")
                        .cloned()
                        .unwrap_or_else(|| json!({}))
                        .to_string(),
                });
            }
            _ => {}
        }
    }
    let mut message = ChatMessage::assistant(text, tool_calls);
    let searches = ProviderSearch::from_anthropic(blocks);
    if !searches.is_empty() {
        message.provider_content = Some(Value::Array(blocks.clone()).to_string());
    }
    let stop = body.get("stop_reason").and_then(Value::as_str);
    Ok(Reply {
        stop: Reply::anthropic_stop(stop, &message),
        message,
        usage: Usage::at(body, "/usage/input_tokens", "/usage/output_tokens"),
        searches,
    })
}

#[async_trait]
impl LlmBackend for AnthropicBackend {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<Reply, LlmError> {
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        // Sessions check before they send; a caller that did not still gets
        // the refusal, never a param silently dropped.
        check_params(request.params).map_err(|e| LlmError::Unsupported(e.to_string()))?;
        let mut body = request_body(&self.config.model, self.config.max_tokens, &request);
        if self.config.stream {
            body["stream"] = json!(true);
        }
        let beta = request.defers_tools().then_some(TOOL_SEARCH_BETA);
        let request = || {
            let mut request = self
                .http
                .post(&url)
                .header("anthropic-version", API_VERSION)
                .json(&body);
            if let Some(beta) = beta {
                request = request.header("anthropic-beta", beta);
            }
            match &self.config.api_key {
                Some(key) => request.header("x-api-key", key),
                None => request,
            }
        };
        let response = send(request, self.config.timeout, self.config.max_retries).await?;
        if self.config.stream {
            read_stream(response, Dialect::Anthropic).await
        } else {
            parse_reply(&read_json(response).await?)
        }
    }

    fn check(&self, params: &RequestParams) -> Result<(), Unsupported> {
        check_params(params)
    }

    fn searches_natively(&self) -> bool {
        self.config.native_tool_search
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn provider(&self) -> &'static str {
        "anthropic"
    }
}
