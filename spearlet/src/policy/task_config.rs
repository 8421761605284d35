//! The MCP part of a task's configuration, as operators write it:
//! `{"mcp": {"enabled": true, "allowed_server_ids": [...], ...}}`.

use serde::Deserialize;

use super::params::TaskPolicy;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskConfig {
    #[serde(default)]
    mcp: McpConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpConfig {
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    allowed_server_ids: Vec<String>,
    #[serde(default)]
    default_server_ids: Vec<String>,
    task_tool_allowlist: Option<Vec<String>>,
    #[serde(default)]
    task_tool_denylist: Vec<String>,
}

/// Parses a task config (JSON); unknown keys are errors, so a typo never
/// silently grants or withholds anything.
pub fn parse_task_config(json: &str) -> Result<TaskPolicy, String> {
    let config: TaskConfig =
        serde_json::from_str(json).map_err(|e| format!("task config is invalid: {e}"))?;
    let mcp = config.mcp;
    for pattern in mcp
        .task_tool_allowlist
        .iter()
        .flatten()
        .chain(&mcp.task_tool_denylist)
    {
        spear_proto::patterns::check_pattern(pattern)
            .map_err(|why| format!("task config: pattern '{pattern}' {why}"))?;
    }
    Ok(TaskPolicy {
        enabled: mcp.enabled,
        allowed_server_ids: mcp.allowed_server_ids,
        default_server_ids: mcp.default_server_ids,
        tool_allowlist: mcp.task_tool_allowlist,
        tool_denylist: mcp.task_tool_denylist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_typos() {
        let task = parse_task_config(r#"{"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "task_tool_denylist": ["rm_*"]}}"#).unwrap();
        assert!(task.enabled);
        assert_eq!(task.allowed_server_ids, vec!["fs"]);
        assert!(parse_task_config(r#"{"mcp": {"enabeld": true}}"#)
            .unwrap_err()
            .contains("enabeld"));
        assert!(parse_task_config(r#"{"mcp": {"task_tool_denylist": [""]}}"#).is_err());
        assert!(
            !parse_task_config("{}").unwrap().enabled,
            "MCP is off unless the task turns it on"
        );
    }
}
