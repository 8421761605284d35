//! The reply of `cchat_send`, as `cchat_recv` hands it to the guest: one
//! serde type, serialized by the node and read by this SDK, so both sides
//! agree on it by construction (docs/guest-api.md shows it as JSON).

use serde::{Deserialize, Serialize};

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
    /// The server that ran it, if one did.
    #[serde(default)]
    pub server: Option<String>,
    /// The server's own name for the tool, if one ran.
    #[serde(default)]
    pub tool: Option<String>,
    /// Whether the model was shown an error for this call.
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub duration_ms: u64,
    /// Bytes of the result shown to the model.
    #[serde(default)]
    pub bytes: u64,
}
