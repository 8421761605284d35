//! The task layer of policy from a task's config. The config format and its
//! checks are shared with SMS (`spear_proto::task`), so a config SMS accepted
//! means the same thing here.

use spear_proto::task::McpConfig;

use super::params::TaskPolicy;

impl From<&McpConfig> for TaskPolicy {
    fn from(mcp: &McpConfig) -> Self {
        TaskPolicy {
            enabled: mcp.enabled,
            allowed_server_ids: mcp.allowed_server_ids.clone(),
            default_server_ids: mcp.default_server_ids.clone(),
            tool_allowlist: mcp.task_tool_allowlist.clone(),
            tool_denylist: mcp.task_tool_denylist.clone(),
            approval: mcp.task_tool_approval.clone(),
        }
    }
}

/// Parses a whole task config (JSON) and returns its MCP policy; unknown keys
/// are errors, so a typo never silently grants or withholds anything.
pub fn parse_task_config(json: &str) -> Result<TaskPolicy, spear_proto::task::TaskError> {
    spear_proto::task::parse_task_config(json).map(|config| TaskPolicy::from(&config.mcp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_typos() {
        let task = parse_task_config(r#"{"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "task_tool_denylist": ["rm_*"]}}"#).unwrap();
        assert!(task.enabled);
        assert_eq!(task.allowed_server_ids, vec!["fs"]);
        assert_eq!(task.tool_denylist, vec!["rm_*"]);
        assert!(parse_task_config(r#"{"mcp": {"enabeld": true}}"#)
            .unwrap_err()
            .to_string()
            .contains("enabeld"));
        assert!(
            !parse_task_config("{}").unwrap().enabled,
            "MCP is off unless the task turns it on"
        );
    }
}
