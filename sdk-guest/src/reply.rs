//! The reply of `cchat_send`, as `cchat_recv` hands it to the guest: one
//! serde type, serialized by the node and read by this SDK, so both sides
//! agree on it by construction (docs/guest-api.md shows it as JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::calls::RequestedCall;

/// What a send produced. `error` is set (and `content` empty) when the
/// send failed; it is the host's sentence saying which limit or failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The model's final text.
    pub content: String,
    /// Why the send failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens the provider reported for this send.
    #[serde(default)]
    pub usage: Usage,
    /// Model requests this send made.
    #[serde(default)]
    pub iterations: u32,
    /// Every tool call the model made in this send, in order.
    #[serde(default)]
    pub trace: Vec<ToolCall>,
    /// Why the model's last answer of this send ended; `max_tokens` means
    /// `content` was cut at the output-token limit.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// The backend (a name from the node's config) and model that answered.
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub model: String,
    /// The tool calls of the model's last answer that the node did not run:
    /// after a send without automatic tool calls, the guest answers each
    /// (`cchat_call_tool` to run an offered MCP tool, then a `tool`
    /// message) before it sends again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RequestedCall>,
    /// With `response_format` `json_object` or `json_schema`: the answer
    /// parsed as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
}

impl Reply {
    /// The tool calls the guest must answer before its next send.
    pub fn tool_calls(&self) -> &[RequestedCall] {
        &self.tool_calls
    }
}

/// Why the model ended an answer, as its provider said (OpenAI's
/// `finish_reason`, Anthropic's `stop_reason`), in one vocabulary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished (`stop`, `end_turn`, `stop_sequence`).
    #[default]
    EndTurn,
    /// The model asked for tool calls (`tool_calls`, `tool_use`).
    ToolCalls,
    /// The output-token limit cut the answer (`length`, `max_tokens`).
    MaxTokens,
    /// The provider withheld the answer (`content_filter`, `refusal`).
    Refusal,
    /// A reason this node does not know (it is in the node's log).
    Other,
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One tool call of a send.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the model gave the call.
    pub tool_call_id: String,
    /// The tool name the model used.
    pub name: String,
    /// The server that ran it, if one did (none for a guest tool).
    #[serde(default)]
    pub server: Option<String>,
    /// The server's own name for the tool, or the guest tool's name.
    #[serde(default)]
    pub tool: Option<String>,
    /// The call ran one of the guest's own tools.
    #[serde(default)]
    pub guest: bool,
    /// Whether the model was shown an error for this call.
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub duration_ms: u64,
    /// Bytes of the result shown to the model.
    #[serde(default)]
    pub bytes: u64,
    /// A call of the node's tool search (`mcp.tool_search`): what the
    /// model searched for and the tools it found, which it may call from
    /// the next request on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchTrace>,
}

/// One search of the session's tools.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchTrace {
    /// The query as the model wrote it.
    pub query: String,
    /// The tools found, best first, each now offered to the model.
    pub found: Vec<FoundTool>,
}

/// A tool a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundTool {
    /// The name the model calls it by.
    pub name: String,
    pub server: String,
    pub tool: String,
}
