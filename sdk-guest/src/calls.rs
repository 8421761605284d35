//! The typed shapes of tool calling that cross the ABI, shared by this SDK
//! and the node: the calls a model asked for ([`RequestedCall`], in a
//! reply), what running one gave ([`ToolResult`], from `cchat_call_tool`),
//! the messages a guest writes to answer them or to build history itself
//! ([`ToolMessage`], [`AssistantMessage`], for `cchat_write_msg` roles
//! `tool` and `assistant`), and a tool the guest implements
//! ([`GuestToolSpec`], for `cchat_write_fn`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call the model asked for and the node did not run (a send
/// without automatic tool calls): the guest decides what to do with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestedCall {
    /// The id to answer with a `tool` message.
    pub id: String,
    /// The tool name as the model sent it.
    pub name: String,
    /// The arguments as the JSON text the model wrote.
    pub arguments: String,
    /// For an MCP tool: its server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// For an MCP tool: the server's own name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// True when the name is one of the session's guest tools.
    #[serde(default)]
    pub guest: bool,
}

/// What running a tool gave: the text shown to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub content: String,
    /// The tool failed (the text says why); the model is told so.
    #[serde(default)]
    pub is_error: bool,
    /// The server that ran it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// When the tool needs a person's approval per call: what became of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalReply>,
}

/// A call's approval as the guest sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalReply {
    pub id: String,
    /// `approved` (the call ran), `denied`, `expired`, `refused` or
    /// `unavailable` (it did not).
    pub state: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// `cchat_write_msg` role `tool`: the answer to one open tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolMessage {
    pub tool_call_id: String,
    pub content: String,
}

/// `cchat_write_msg` role `assistant`: a model turn the guest writes
/// itself (text, tool calls, or both), when it builds history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssistantMessage {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<AssistantCall>,
}

/// A tool call inside an [`AssistantMessage`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssistantCall {
    pub id: String,
    pub name: String,
    /// JSON text, as a model writes it.
    pub arguments: String,
}

/// `cchat_write_fn`: a tool the guest implements, offered to the model
/// under `name` next to the MCP tools the policy allows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestToolSpec {
    /// `^[A-Za-z0-9_-]{1,64}$`, not starting with `mcp` (that name space
    /// is the MCP tools').
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments, `{"type": "object", ...}`.
    pub parameters: Value,
}

/// Exports the node calls back into (docs/guest-api.md, "guest tools").
pub mod exports {
    /// `spear_alloc(len: u32) -> u32`: a buffer of `len` bytes the guest
    /// owns until the next call, where the node writes a call's arguments.
    pub const ALLOC: &str = "spear_alloc";
    /// `spear_tool_call(fn_id: i32, args: u32, args_len: u32, out: u32) -> i32`:
    /// runs guest tool `fn_id`; writes its result's `(ptr, len)` as two
    /// little-endian u32 at `out`; returns 0 (ok) or 1 (the tool failed:
    /// the result is the error the model sees).
    pub const TOOL_CALL: &str = "spear_tool_call";
}
