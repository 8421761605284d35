//! The task and session layers of MCP policy, and the guest's writes to them.
//!
//! The task layer comes from the task's configuration and is read-only to the
//! guest. The session layer starts from the task's defaults at
//! `cchat_create` and the guest may only narrow it: every write is checked
//! against the task, and a refused write changes nothing.

use serde_json::{json, Value};
use spear_guest::params::{self, ToolSearch};
use spear_proto::patterns::check_pattern;

/// Task-level MCP policy (`mcp.*` in the task config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskPolicy {
    /// `mcp.enabled`: MCP may be used at all by this task.
    pub enabled: bool,
    /// `mcp.allowed_server_ids`: the servers sessions may use; none when empty.
    pub allowed_server_ids: Vec<String>,
    /// `mcp.default_server_ids`: a new session's `server_ids`.
    pub default_server_ids: Vec<String>,
    /// `mcp.task_tool_allowlist`: when set, only matching tools.
    pub tool_allowlist: Option<Vec<String>>,
    /// `mcp.task_tool_denylist`.
    pub tool_denylist: Vec<String>,
    /// `mcp.task_tool_approval`: calls of matching tools wait for a
    /// person's approval.
    pub approval: Vec<String>,
}

/// Session-level MCP policy, written by the guest with `cchat_ctl_set_param`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPolicy {
    /// `mcp.enabled`.
    pub enabled: bool,
    /// `mcp.server_ids`: always a subset of the task's allowed servers.
    pub server_ids: Vec<String>,
    /// `mcp.tool_allowlist`: when set, only matching tools.
    pub tool_allowlist: Option<Vec<String>>,
    /// `mcp.tool_denylist`.
    pub tool_denylist: Vec<String>,
    /// `mcp.tool_search`: how the session's tools reach the model. Not a
    /// permission (it changes how tools are shown, never which), so any
    /// value may be written.
    pub tool_search: ToolSearch,
}

impl SessionPolicy {
    /// The session `cchat_create` opens: the task's defaults, narrowed to
    /// what the task allows (a default outside the allowed set is dropped).
    pub fn from_task(task: &TaskPolicy) -> Self {
        Self {
            enabled: task.enabled,
            server_ids: task
                .default_server_ids
                .iter()
                .filter(|id| task.allowed_server_ids.contains(id))
                .cloned()
                .collect(),
            tool_allowlist: None,
            tool_denylist: Vec::new(),
            tool_search: ToolSearch::default(),
        }
    }
}

/// Why a param write or read was refused. Maps onto the host API's errno.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// `EACCES`: the write would widen what the task allows.
    #[error("permission denied: {0}")]
    Denied(String),
    /// `EINVAL`: the value has the wrong shape.
    #[error("invalid value for {key}: {reason}")]
    Invalid { key: String, reason: String },
    /// `ENOENT`: not an MCP param this layer knows.
    #[error("unknown MCP param '{0}'")]
    Unknown(String),
}

/// True for keys this module owns (`mcp.*`).
pub fn is_mcp_key(key: &str) -> bool {
    key.starts_with("mcp.")
}

/// Applies a guest's `cchat_ctl_set_param(key, value)` to `session`, or
/// refuses it and leaves `session` untouched.
pub fn set_param(
    task: &TaskPolicy,
    session: &mut SessionPolicy,
    key: &str,
    value: &Value,
) -> Result<(), ParamError> {
    if key.starts_with("mcp.task_") || params::TASK_KEYS.contains(&key) {
        return Err(ParamError::Denied(format!(
            "{key} is set by the task and is read-only to the guest"
        )));
    }
    match key {
        params::MCP_ENABLED => {
            let enabled = value
                .as_bool()
                .ok_or_else(|| invalid(key, "expected true or false"))?;
            if enabled && !task.enabled {
                return Err(ParamError::Denied(
                    "the task does not allow MCP (its mcp.enabled is false)".into(),
                ));
            }
            session.enabled = enabled;
        }
        params::MCP_SERVER_IDS => {
            let ids = strings(key, value)?;
            if let Some(outside) = ids.iter().find(|id| !task.allowed_server_ids.contains(id)) {
                return Err(ParamError::Denied(format!(
                    "server '{}' is not in the task's mcp.allowed_server_ids",
                    outside.chars().take(64).collect::<String>()
                )));
            }
            let mut unique: Vec<String> = Vec::with_capacity(ids.len());
            for id in ids {
                if !unique.contains(&id) {
                    unique.push(id);
                }
            }
            session.server_ids = unique;
        }
        params::MCP_TOOL_ALLOWLIST => {
            session.tool_allowlist = if value.is_null() {
                None
            } else {
                Some(patterns(key, value)?)
            };
        }
        params::MCP_TOOL_DENYLIST => {
            session.tool_denylist = if value.is_null() {
                Vec::new()
            } else {
                patterns(key, value)?
            };
        }
        params::MCP_TOOL_SEARCH => {
            session.tool_search = serde_json::from_value(value.clone())
                .map_err(|_| invalid(key, "expected \"off\", \"on\" or \"auto\""))?;
        }
        other => return Err(ParamError::Unknown(other.chars().take(64).collect())),
    }
    Ok(())
}

/// `cchat_ctl_get_param(key)` for MCP keys; task keys are readable.
pub fn get_param(
    task: &TaskPolicy,
    session: &SessionPolicy,
    key: &str,
) -> Result<Value, ParamError> {
    Ok(match key {
        params::MCP_ENABLED => json!(session.enabled),
        params::MCP_SERVER_IDS => json!(session.server_ids),
        params::MCP_TOOL_ALLOWLIST => json!(session.tool_allowlist),
        params::MCP_TOOL_DENYLIST => json!(session.tool_denylist),
        params::MCP_TOOL_SEARCH => json!(session.tool_search),
        params::MCP_ALLOWED_SERVER_IDS => json!(task.allowed_server_ids),
        params::MCP_DEFAULT_SERVER_IDS => json!(task.default_server_ids),
        params::MCP_TASK_TOOL_ALLOWLIST => json!(task.tool_allowlist),
        params::MCP_TASK_TOOL_DENYLIST => json!(task.tool_denylist),
        params::MCP_TASK_TOOL_APPROVAL => json!(task.approval),
        other => return Err(ParamError::Unknown(other.chars().take(64).collect())),
    })
}

fn invalid(key: &str, reason: &str) -> ParamError {
    ParamError::Invalid {
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

/// Bound on list params, so a guest cannot make the host hold huge lists.
const MAX_LIST: usize = 1024;

fn strings(key: &str, value: &Value) -> Result<Vec<String>, ParamError> {
    let items = value
        .as_array()
        .ok_or_else(|| invalid(key, "expected an array of strings"))?;
    if items.len() > MAX_LIST {
        return Err(invalid(key, "more than 1024 entries"));
    }
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| invalid(key, "expected an array of strings"))
        })
        .collect()
}

fn patterns(key: &str, value: &Value) -> Result<Vec<String>, ParamError> {
    let list = strings(key, value)?;
    for pattern in &list {
        check_pattern(pattern).map_err(|reason| invalid(key, &format!("a pattern {reason}")))?;
    }
    Ok(list)
}
