//! The param keys of `cchat_ctl_set_param` / `cchat_ctl_get_param`, shared
//! with the node so a key means the same on both sides. Session keys can be
//! written (only to narrow); task keys can only be read.

/// `true`/`false`: whether the session offers MCP tools at all.
pub const MCP_ENABLED: &str = "mcp.enabled";
/// The session's servers, a subset of the task's.
pub const MCP_SERVER_IDS: &str = "mcp.server_ids";
/// Tool patterns the session allows (`*`, `?`).
pub const MCP_TOOL_ALLOWLIST: &str = "mcp.tool_allowlist";
/// Tool patterns the session denies.
pub const MCP_TOOL_DENYLIST: &str = "mcp.tool_denylist";

/// `"off"`, `"on"` or `"auto"` (the default): whether the model is first
/// given a search over the session's tools instead of every definition
/// (docs/guest-api.md, "Tool search").
pub const MCP_TOOL_SEARCH: &str = "mcp.tool_search";

/// The name of the node's search tool, offered to the model when a send
/// searches: a pending call of it (after a send without automatic tool
/// calls) is run with `cchat_call_tool` like any other. In the `mcp` name
/// space, which guest tools may not use, and unlike any MCP tool's name.
pub const SEARCH_TOOL: &str = "mcp_search_tools";

/// The values of [`MCP_TOOL_SEARCH`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSearch {
    /// Every allowed tool's definition in every request.
    Off,
    /// The node's search tool first; the tools it finds are offered from
    /// the next request on, for the rest of the session.
    On,
    /// `On` when the session would offer more than 30 MCP tools or more
    /// than 32 KiB of their definitions, else `Off`.
    #[default]
    Auto,
}

/// The session keys a guest may write.
pub const SESSION_KEYS: [&str; 5] = [
    MCP_ENABLED,
    MCP_SERVER_IDS,
    MCP_TOOL_ALLOWLIST,
    MCP_TOOL_DENYLIST,
    MCP_TOOL_SEARCH,
];

/// The servers the task allows (read-only).
pub const MCP_ALLOWED_SERVER_IDS: &str = "mcp.allowed_server_ids";
/// The servers a new session starts with (read-only).
pub const MCP_DEFAULT_SERVER_IDS: &str = "mcp.default_server_ids";
/// The task's tool allowlist (read-only).
pub const MCP_TASK_TOOL_ALLOWLIST: &str = "mcp.task_tool_allowlist";
/// The task's tool denylist (read-only).
pub const MCP_TASK_TOOL_DENYLIST: &str = "mcp.task_tool_denylist";
/// The task's tools whose calls wait for a person's approval (read-only;
/// server files may name more, docs/trust.md).
pub const MCP_TASK_TOOL_APPROVAL: &str = "mcp.task_tool_approval";

/// The task keys a guest may read and never write.
pub const TASK_KEYS: [&str; 5] = [
    MCP_ALLOWED_SERVER_IDS,
    MCP_DEFAULT_SERVER_IDS,
    MCP_TASK_TOOL_ALLOWLIST,
    MCP_TASK_TOOL_DENYLIST,
    MCP_TASK_TOOL_APPROVAL,
];

/// Flags of `cchat_send`.
pub mod send_flags {
    /// Run the tool loop: offer the session's allowed tools and execute the
    /// calls the model makes until it answers. Without it, one model request
    /// is made and its tool calls come back in the reply for the guest to
    /// run or refuse (guest-driven tool calls).
    pub const AUTO_TOOL_CALLS: u32 = 1;
    /// Offer no tools in this send (the model answers on its own).
    pub const NO_TOOLS: u32 = 2;
    /// Every flag the node knows; any other bit is `-EINVAL`.
    pub const ALL: u32 = AUTO_TOOL_CALLS | NO_TOOLS;
}
