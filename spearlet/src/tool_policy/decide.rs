//! The predicate: is this server, and this tool, offered to the model? Each
//! answer names the layer and the rule that decided it, so `spearlet explain`
//! can tell an operator exactly why a model sees no tools.

use spear_proto::patterns::glob_match;
use spear_proto::v1::ServerSpec;

use super::params::{SessionPolicy, TaskPolicy};

/// Where a decision was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The task's configuration.
    Task,
    /// The session's params, set by the guest.
    Session,
    /// The node's registry (the server is not known there).
    Registry,
    /// The server's own declaration (enabled, allowed/denied tools).
    Server,
    /// The server's connection on this node.
    Health,
    /// The tool's definition against its pin (docs/trust.md).
    Pin,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Task => "task",
            Layer::Session => "session",
            Layer::Registry => "registry",
            Layer::Server => "server",
            Layer::Health => "health",
            Layer::Pin => "pin",
        }
    }
}

/// One answer of the predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub offered: bool,
    pub layer: Layer,
    pub rule: String,
}

impl Verdict {
    fn deny(layer: Layer, rule: impl Into<String>) -> Self {
        Self {
            offered: false,
            layer,
            rule: rule.into(),
        }
    }

    fn allow(rule: impl Into<String>) -> Self {
        Self {
            offered: true,
            layer: Layer::Server,
            rule: rule.into(),
        }
    }
}

/// Whether `server_id`'s tools may be offered at all. `spec` is the server
/// as the node's registry has it; `health` is `Err(last error)` when its
/// connection has failed.
pub fn server_verdict(
    task: &TaskPolicy,
    session: &SessionPolicy,
    server_id: &str,
    spec: Option<&ServerSpec>,
    health: Result<(), &str>,
) -> Verdict {
    if !task.enabled {
        return Verdict::deny(
            Layer::Task,
            "MCP is disabled for this task (task mcp.enabled = false)",
        );
    }
    if !session.enabled {
        return Verdict::deny(
            Layer::Session,
            "MCP is disabled for this session (mcp.enabled = false)",
        );
    }
    if !task.allowed_server_ids.iter().any(|id| id == server_id) {
        return Verdict::deny(
            Layer::Task,
            "server is not in the task's mcp.allowed_server_ids",
        );
    }
    if !session.server_ids.iter().any(|id| id == server_id) {
        return Verdict::deny(
            Layer::Session,
            "server is not in the session's mcp.server_ids",
        );
    }
    let Some(spec) = spec else {
        return Verdict::deny(
            Layer::Registry,
            "server is unknown to this node's registry (check `sms servers` and the node's sync)",
        );
    };
    if !spec.enabled {
        return Verdict::deny(
            Layer::Server,
            "server is disabled in its declaration (enabled = false)",
        );
    }
    if let Err(error) = health {
        return Verdict::deny(
            Layer::Health,
            format!("server is failing on this node: {error}"),
        );
    }
    Verdict::allow("server is allowed by task and session and is usable")
}

/// Whether `tool` of an offered server may be offered. Deny lists win over
/// allow lists at every layer.
pub fn tool_verdict(
    task: &TaskPolicy,
    session: &SessionPolicy,
    spec: &ServerSpec,
    tool: &str,
) -> Verdict {
    let denied_by = |list: &[String]| list.iter().find(|p| glob_match(p, tool)).cloned();
    if let Some(p) = denied_by(&spec.denied_tools) {
        return Verdict::deny(
            Layer::Server,
            format!("denied by the server's denied_tools pattern '{p}'"),
        );
    }
    if let Some(p) = denied_by(&task.tool_denylist) {
        return Verdict::deny(
            Layer::Task,
            format!("denied by the task's mcp.task_tool_denylist pattern '{p}'"),
        );
    }
    if let Some(p) = denied_by(&session.tool_denylist) {
        return Verdict::deny(
            Layer::Session,
            format!("denied by the session's mcp.tool_denylist pattern '{p}'"),
        );
    }
    let allow_checks: [(Option<&Vec<String>>, Layer, &str); 3] = [
        (
            spec.allowed_tools.as_ref().map(|a| &a.patterns),
            Layer::Server,
            "the server's allowed_tools",
        ),
        (
            task.tool_allowlist.as_ref(),
            Layer::Task,
            "the task's mcp.task_tool_allowlist",
        ),
        (
            session.tool_allowlist.as_ref(),
            Layer::Session,
            "the session's mcp.tool_allowlist",
        ),
    ];
    let mut matched = Vec::new();
    for (list, layer, name) in allow_checks {
        let Some(list) = list else { continue };
        if list.is_empty() {
            return Verdict::deny(layer, format!("{name} is empty, which allows no tool"));
        }
        match list.iter().find(|p| glob_match(p, tool)) {
            Some(p) => matched.push(format!("{name} pattern '{p}'")),
            None => return Verdict::deny(layer, format!("not matched by {name}")),
        }
    }
    if matched.is_empty() {
        Verdict::allow("allowed at every layer (no allow list, no deny pattern matches)")
    } else {
        Verdict::allow(format!("allowed by {}", matched.join(" and ")))
    }
}

/// Whether calls of `tool` wait for a person's approval (docs/trust.md),
/// and the rule that says so: the server's `approval.tools`, or the
/// task's `mcp.task_tool_approval`.
pub fn approval_rule(task: &TaskPolicy, spec: Option<&ServerSpec>, tool: &str) -> Option<String> {
    let server = spec
        .and_then(|s| s.approval.as_ref())
        .and_then(|a| a.tools.iter().find(|p| glob_match(p, tool)))
        .map(|p| format!("server approval.tools '{p}'"));
    server.or_else(|| {
        task.approval
            .iter()
            .find(|p| glob_match(p, tool))
            .map(|p| format!("task mcp.task_tool_approval '{p}'"))
    })
}
