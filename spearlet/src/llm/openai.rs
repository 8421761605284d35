//! OpenAI-compatible chat completions, streaming or not.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use spear_guest::request::{ToolChoice, ToolMode};

use super::backend::LlmBackend;
use super::request::ChatRequest;
use super::retry::{json as read_json, send};
use super::stream::{read_stream, Dialect};
use super::types::{ChatMessage, LlmError, Reply, Role, ToolCall, Usage};

/// Where and how to reach the provider. The key is read from the node's
/// environment by the caller; it never appears in errors or logs.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// e.g. `https://api.openai.com/v1` (the path `/chat/completions` is added).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    /// Retries after a 429 or 5xx answer.
    pub max_retries: u32,
    /// Ask for a streamed answer (tool-call deltas are assembled here).
    pub stream: bool,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

pub struct OpenAiBackend {
    config: OpenAiConfig,
    http: reqwest::Client,
}

impl OpenAiBackend {
    pub fn new(config: OpenAiConfig) -> Self {
        Self {
            config,
            http: crate::http_client::http_client(),
        }
    }

    fn body(&self, request: &ChatRequest<'_>) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
        let mut body = json!({"model": self.config.model, "messages": messages});
        if self.config.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
        }
        map_params(&mut body, request);
        body
    }
}

/// The session's request params in chat-completions terms; every param
/// has one here (`check` refuses none).
fn map_params(body: &mut Value, request: &ChatRequest<'_>) {
    let p = request.params;
    request.write_sampling(body);
    if let Some(n) = p.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(stop) = &p.stop {
        body["stop"] = json!(stop);
    }
    if let Some(seed) = p.seed {
        body["seed"] = json!(seed);
    }
    if let Some(format) = &p.response_format {
        body["response_format"] = json!(format);
    }
    if let Some(choice) = request.tool_choice() {
        body["tool_choice"] = match choice {
            ToolChoice::Mode(ToolMode::Auto) => json!("auto"),
            ToolChoice::Mode(ToolMode::None) => json!("none"),
            ToolChoice::Mode(ToolMode::Required) => json!("required"),
            ToolChoice::Named { name } => json!({"type": "function", "function": {"name": name}}),
        };
    }
    // The API refuses parallel_tool_calls without tools.
    if let (Some(parallel), false) = (p.parallel_tool_calls, request.tools.is_empty()) {
        body["parallel_tool_calls"] = json!(parallel);
    }
}

fn message_json(m: &ChatMessage) -> Value {
    match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Tool => json!({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}),
        Role::Assistant => {
            // An empty answer without calls is "" (the API refuses a null
            // content unless the message carries tool calls).
            let content = match &m.content {
                None if m.tool_calls.is_empty() => Some(String::new()),
                content => content.clone(),
            };
            let mut v = json!({"role": "assistant", "content": content});
            if !m.tool_calls.is_empty() {
                v["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
            }
            v
        }
    }
}

/// Parses a chat completion response body.
pub fn parse_reply(body: &Value) -> Result<Reply, LlmError> {
    let message = body
        .pointer("/choices/0/message")
        .ok_or_else(|| LlmError::BadReply("no choices[0].message".into()))?;
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut tool_calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}")
            .to_string();
        if id.is_empty() {
            return Err(LlmError::BadReply("a tool call has no id".into()));
        }
        tool_calls.push(ToolCall {
            id,
            name,
            arguments,
        });
    }
    let message = ChatMessage::assistant(content.unwrap_or_default(), tool_calls);
    let finish = body
        .pointer("/choices/0/finish_reason")
        .and_then(Value::as_str);
    Ok(Reply {
        stop: Reply::openai_stop(finish, &message),
        message,
        usage: Usage::at(body, "/usage/prompt_tokens", "/usage/completion_tokens"),
        searches: Vec::new(),
    })
}

#[async_trait]
impl LlmBackend for OpenAiBackend {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<Reply, LlmError> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let body = self.body(&request);
        let request = || {
            let request = self.http.post(&url).json(&body);
            match &self.config.api_key {
                Some(key) => request.bearer_auth(key),
                None => request,
            }
        };
        let response = send(request, self.config.timeout, self.config.max_retries).await?;
        if self.config.stream {
            read_stream(response, Dialect::OpenAi).await
        } else {
            parse_reply(&read_json(response).await?)
        }
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn provider(&self) -> &'static str {
        "openai"
    }
}
