//! The provider-neutral chat shape the loop works with.

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the JSON text the model wrote.
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: Option<String>,
    /// Assistant messages: the calls asked for.
    pub tool_calls: Vec<ToolCall>,
    /// Tool messages: the call answered.
    pub tool_call_id: Option<String>,
    /// An Anthropic answer with server-side tool search: its content
    /// blocks as the provider sent them (JSON), which the next requests
    /// must carry back as they are.
    pub provider_content: Option<String>,
}

impl ChatMessage {
    pub fn user(text: &str) -> Self {
        Self {
            role: Role::User,
            content: Some(text.to_string()),
            tool_calls: vec![],
            tool_call_id: None,
            provider_content: None,
        }
    }

    pub fn system(text: &str) -> Self {
        Self {
            role: Role::System,
            content: Some(text.to_string()),
            tool_calls: vec![],
            tool_call_id: None,
            provider_content: None,
        }
    }

    /// The model's answer: text (absent when empty) and/or tool calls.
    pub fn assistant(text: String, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: (!text.is_empty()).then_some(text),
            tool_calls,
            tool_call_id: None,
            provider_content: None,
        }
    }

    pub fn tool(call_id: &str, text: String) -> Self {
        Self {
            role: Role::Tool,
            content: Some(text),
            tool_calls: vec![],
            tool_call_id: Some(call_id.to_string()),
            provider_content: None,
        }
    }

    /// Bytes the host keeps for this message, as charged to a run's
    /// host-memory budget: its text plus a fixed cost per part.
    pub fn footprint(&self) -> usize {
        const PART: usize = 64;
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| PART + c.id.len() + c.name.len() + c.arguments.len())
            .sum();
        PART + self.content.as_ref().map_or(0, String::len)
            + self.tool_call_id.as_ref().map_or(0, String::len)
            + self.provider_content.as_ref().map_or(0, String::len)
            + calls
    }
}

/// A tool as injected into a request.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Sent for the provider's own tool search to find, not loaded
    /// (Anthropic's `defer_loading`; only on a backend that searches
    /// natively).
    pub deferred: bool,
}

/// Tokens as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    /// The token counts at two JSON pointers of a provider's answer
    /// (each provider names them differently); absent counts are 0.
    pub fn at(body: &Value, prompt: &str, completion: &str) -> Usage {
        let count = |pointer| body.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            prompt_tokens: count(prompt),
            completion_tokens: count(completion),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// Why the model ended an answer: the guest's vocabulary (the reply of
/// `cchat_recv` carries it), mapped here from each provider's words.
pub use spear_guest::reply::StopReason;

impl Reply {
    /// OpenAI's `finish_reason`. Servers that omit it are read by what
    /// they sent: tool calls, or a finished answer.
    pub fn openai_stop(finish_reason: Option<&str>, message: &ChatMessage) -> StopReason {
        match finish_reason {
            Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolCalls,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => unknown_stop(other),
            None if message.tool_calls.is_empty() => StopReason::EndTurn,
            None => StopReason::ToolCalls,
        }
    }

    /// Anthropic's `stop_reason`.
    pub fn anthropic_stop(stop_reason: Option<&str>, message: &ChatMessage) -> StopReason {
        match stop_reason {
            Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolCalls,
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::MaxTokens,
            Some("refusal") => StopReason::Refusal,
            Some(other) => unknown_stop(other),
            None => Self::openai_stop(None, message),
        }
    }
}

fn unknown_stop(word: &str) -> StopReason {
    tracing::info!(
        stop_reason = word,
        "the model provider gave a stop reason this node does not know"
    );
    StopReason::Other
}

/// One answer of the model.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The assistant message (text and/or tool calls).
    pub message: ChatMessage,
    pub usage: Usage,
    /// Why the answer ended.
    pub stop: StopReason,
    /// The searches the provider ran on its side before answering
    /// (Anthropic's tool search), in order.
    pub searches: Vec<ProviderSearch>,
}

/// One search the provider ran over the deferred tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderSearch {
    /// The provider's id of it (`srvtoolu_…`).
    pub id: String,
    /// The search tool the model used.
    pub tool: String,
    pub query: String,
    /// The names of the tools it referenced, now loaded for the model.
    pub found: Vec<String>,
}

impl ProviderSearch {
    /// The server-side searches among an answer's content blocks: each
    /// `server_tool_use` with the tools its `tool_search_tool_result`
    /// referenced.
    pub fn from_anthropic(blocks: &[Value]) -> Vec<ProviderSearch> {
        let text = |block: &Value, pointer: &str| {
            block
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let mut searches: Vec<ProviderSearch> = Vec::new();
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("server_tool_use") => searches.push(ProviderSearch {
                    id: text(block, "/id"),
                    tool: text(block, "/name"),
                    query: block
                        .pointer("/input/query")
                        .or_else(|| block.pointer("/input/pattern"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    found: Vec::new(),
                }),
                Some("tool_search_tool_result") => {
                    let id = text(block, "/tool_use_id");
                    let found = block
                        .pointer("/content/tool_references")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r.get("tool_name").and_then(Value::as_str))
                        .map(str::to_string);
                    if let Some(search) = searches.iter_mut().find(|s| s.id == id) {
                        search.found.extend(found);
                    }
                }
                _ => {}
            }
        }
        searches
    }
}

/// Why a request to the model failed, in one sentence for the guest. Never
/// carries the API key.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("the model provider answered {status}: {message}")]
    Provider { status: u16, message: String },
    #[error("the model provider failed in the middle of its answer: {0}")]
    Interrupted(String),
    #[error("the model provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the model provider did not answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("the model provider's answer could not be read: {0}")]
    BadReply(String),
    /// A param the backend cannot honour, caught before sending.
    #[error("{0}")]
    Unsupported(String),
    #[error("this node has no LLM backend; the operator configures one under [llm.backends] in the node's --config")]
    NotConfigured,
}
