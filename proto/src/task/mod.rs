//! A task's spec and config, checked the same way by SMS (when the task is
//! registered, so a mistake is reported to the operator who made it) and by
//! the node (which trusts nothing it did not check itself).

use serde::{Deserialize, Serialize};

use crate::patterns::check_pattern;
pub use crate::task_error::{TaskError, MAX_CONFIG_BYTES, MAX_TASK_ID_LEN};

mod keys;
use crate::v1::TaskSpec;

/// Caps on limits a task may ask for.
/// Guest linear memory: nodes reserve this much address space per pooled slot.
pub const MAX_MEMORY_MB: u32 = 256;
pub const MAX_WALL_MS: u64 = 60 * 60 * 1000;
pub const MAX_SESSIONS: u32 = 1024;
pub const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// Host memory kept for one run (messages, histories, tool results, replies).
pub const MAX_HOST_MEMORY_MB: u64 = 1024;

/// A task's config: `{"mcp": {...}, "llm": {...}, "limits": {...}}`. Unknown
/// keys are errors, so a typo never silently grants or withholds anything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    #[serde(default)]
    pub mcp: McpConfig,
    #[serde(default)]
    pub llm: LlmChoice,
    #[serde(default)]
    pub limits: TaskLimits,
    #[serde(default)]
    pub wasi: WasiGrants,
    /// Who besides admins may invoke the task: `subject:<sub>`,
    /// `group:<name>` (of SMS's OpenID Connect issuer) or a SPIFFE id.
    /// Empty: admins only.
    #[serde(default)]
    pub invokers: Vec<String>,
    /// Limits across every run of the task, on every node (docs/quotas.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<crate::quota::TaskQuota>,
}

/// What WASI gives the guest beyond its stdin/stdout/stderr. Nothing unless
/// the task grants it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WasiGrants {
    /// Arguments after `argv[0]` (which is the task id).
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables. A value may hold `${NAME}` references,
    /// resolved from the node's environment when the task runs, so secrets
    /// stay on the nodes; the node's own variables are never passed
    /// otherwise.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Host directories the guest may open, at a path of its own.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
}

/// One directory granted to the guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// An absolute path on the node.
    pub host: String,
    /// Where the guest sees it, such as `/data`.
    pub guest: String,
    /// Read-only unless set.
    #[serde(default)]
    pub writable: bool,
}

/// The task layer of MCP policy (docs/mcp-on-nodes.md, "Policy"), read-only to the guest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// MCP is off unless the task turns it on.
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub allowed_server_ids: Vec<String>,
    /// The session's `server_ids` at `cchat_create`; must be allowed.
    #[serde(default)]
    pub default_server_ids: Vec<String>,
    /// When set, only tools matching one of these patterns.
    pub task_tool_allowlist: Option<Vec<String>>,
    #[serde(default)]
    pub task_tool_denylist: Vec<String>,
    /// Tools (patterns) whose every call waits for a person's approval
    /// (docs/trust.md), on top of what the servers' files ask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_tool_approval: Vec<String>,
}

/// Which of the node's configured LLM backends the task uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmChoice {
    /// A backend name from the node's config; empty means the node's default.
    pub backend: Option<String>,
    /// Overrides the backend's model.
    pub model: Option<String>,
    /// Other backends a guest session may pick with its `backend` param
    /// (the node must configure them too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_backends: Vec<String>,
    /// Other models a guest session may pick with its `model` param (the
    /// node must offer them too, in its backend's `models`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_models: Vec<String>,
}

/// Limits of one run; absent values take the node's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskLimits {
    pub memory_mb: Option<u32>,
    /// Guest CPU over the whole run (host calls included, waiting on the
    /// model or tools not).
    pub cpu_ms: Option<u64>,
    /// The whole run, model and tool time included.
    pub wall_ms: Option<u64>,
    pub max_sessions: Option<u32>,
    /// Per `cchat_send`.
    pub max_iterations: Option<u32>,
    /// Per `cchat_send`.
    pub max_total_tool_calls: Option<u32>,
    pub output_bytes: Option<u64>,
    /// What the host keeps for the guest, over the whole run.
    pub host_memory_mb: Option<u64>,
    /// Model requests over the whole run, every session and send.
    pub max_model_requests: Option<u64>,
    /// Tokens (prompt + completion, as the provider reports them) over the run.
    pub max_tokens: Option<u64>,
    /// Tool calls over the whole run.
    pub max_tool_calls: Option<u64>,
}

impl TaskLimits {
    /// Every limit with its key and the most a task may ask for.
    pub fn entries(&self) -> [(&'static str, Option<u64>, u64); 11] {
        [
            (
                "memory_mb",
                self.memory_mb.map(u64::from),
                u64::from(MAX_MEMORY_MB),
            ),
            ("cpu_ms", self.cpu_ms, MAX_WALL_MS),
            ("wall_ms", self.wall_ms, MAX_WALL_MS),
            (
                "max_sessions",
                self.max_sessions.map(u64::from),
                u64::from(MAX_SESSIONS),
            ),
            ("max_iterations", self.max_iterations.map(u64::from), 1000),
            (
                "max_total_tool_calls",
                self.max_total_tool_calls.map(u64::from),
                10_000,
            ),
            ("output_bytes", self.output_bytes, MAX_OUTPUT_BYTES),
            ("host_memory_mb", self.host_memory_mb, MAX_HOST_MEMORY_MB),
            ("max_model_requests", self.max_model_requests, 100_000),
            ("max_tokens", self.max_tokens, 1_000_000_000),
            ("max_tool_calls", self.max_tool_calls, 100_000),
        ]
    }
}

/// Parses and checks a task config.
pub fn parse_task_config(json: &str) -> Result<TaskConfig, TaskError> {
    if json.len() > MAX_CONFIG_BYTES {
        return Err(TaskError::LargeConfig { len: json.len() });
    }
    let json = if json.trim().is_empty() { "{}" } else { json };
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| TaskError::Json(e.to_string()))?;
    let unknown = keys::unknown_keys(&value);
    if !unknown.is_empty() {
        return Err(TaskError::UnknownKeys(unknown.join(", ")));
    }
    let config: TaskConfig =
        serde_json::from_value(value).map_err(|e| TaskError::Json(e.to_string()))?;
    let mcp = &config.mcp;
    for pattern in mcp
        .task_tool_allowlist
        .iter()
        .flatten()
        .chain(&mcp.task_tool_denylist)
        .chain(&mcp.task_tool_approval)
    {
        check_pattern(pattern).map_err(|why| TaskError::Pattern {
            pattern: pattern.clone(),
            why,
        })?;
    }
    if let Some(id) = mcp
        .default_server_ids
        .iter()
        .find(|id| !mcp.allowed_server_ids.contains(id))
    {
        return Err(TaskError::DefaultNotAllowed { id: id.clone() });
    }
    check_wasi(&config.wasi)?;
    for invoker in &config.invokers {
        crate::principal::Invoker::parse(invoker).map_err(TaskError::Invoker)?;
    }
    if let Some(quota) = &config.quota {
        quota.check().map_err(TaskError::Quota)?;
    }
    for (name, value, max) in config.limits.entries() {
        if let Some(value) = value {
            if value == 0 || value > max {
                return Err(TaskError::Limit { name, value, max });
            }
        }
    }
    Ok(config)
}

fn check_wasi(wasi: &WasiGrants) -> Result<(), TaskError> {
    if wasi.args.len() > 256 || wasi.env.len() > 256 || wasi.dirs.len() > 16 {
        return Err(TaskError::TooManyGrants);
    }
    for (key, value) in &wasi.env {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(TaskError::EnvKey { key: key.clone() });
        }
        crate::refs::check_references(value).map_err(|why| TaskError::EnvValue {
            key: key.clone(),
            why: why.to_string(),
        })?;
    }
    for dir in &wasi.dirs {
        if !dir.host.starts_with('/') || !dir.guest.starts_with('/') {
            return Err(TaskError::RelativeDir {
                host: dir.host.clone(),
                guest: dir.guest.clone(),
            });
        }
        if dir.host.split('/').any(|part| part == "..") {
            return Err(TaskError::DotDotDir {
                host: dir.host.clone(),
            });
        }
    }
    Ok(())
}

/// Checks a task id: letters, digits, `-`, `_` and `.`.
pub fn check_task_id(id: &str) -> Result<(), TaskError> {
    if id.is_empty() {
        return Err(TaskError::EmptyId);
    }
    if id.len() > MAX_TASK_ID_LEN {
        return Err(TaskError::LongId { len: id.len() });
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(TaskError::IdChar { bad });
    }
    Ok(())
}

/// Checks a whole spec: id, module URI and digest, config. Errors other
/// than the id's name the task.
pub fn check_task_spec(spec: &TaskSpec) -> Result<TaskConfig, TaskError> {
    check_task_id(&spec.id)?;
    let check = || {
        let uri = spec.module_uri.as_str();
        let known = ["file:///", "http://", "https://"];
        if !known.iter().any(|scheme| uri.starts_with(scheme)) {
            return Err(TaskError::ModuleUri {
                uri: uri.chars().take(200).collect(),
            });
        }
        let sha = spec.module_sha256.as_str();
        if sha.len() != 64
            || !sha
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(TaskError::ModuleSha);
        }
        if spec.description.len() > 1024 {
            return Err(TaskError::LongDescription);
        }
        parse_task_config(&spec.config_json)
    };
    check().map_err(|error| error.in_task(&spec.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(config: &str) -> TaskSpec {
        TaskSpec {
            id: "fs-agent".into(),
            module_uri: "file:///srv/agent.wasm".into(),
            module_sha256: "a".repeat(64),
            config_json: config.into(),
            description: String::new(),
        }
    }

    #[test]
    fn accepts_a_full_config() {
        let config = check_task_spec(&spec(
            r#"{"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"], "task_tool_denylist": ["write_*"]},
                "llm": {"backend": "openai", "model": "gpt-4o-mini"}, "limits": {"wall_ms": 30000}}"#,
        ))
        .unwrap();
        assert!(config.mcp.enabled);
        assert_eq!(config.limits.wall_ms, Some(30000));
        assert!(
            !parse_task_config("").unwrap().mcp.enabled,
            "MCP is off unless turned on"
        );
    }

    #[test]
    fn every_unknown_key_is_named_with_what_it_may_have_meant() {
        let said = parse_task_config(
            r#"{"mcp": {"enabeld": true, "alowed_server_ids": []}, "limit": {}, "limits": {"wal_ms": 5},
                "quota": {"tool_call": {"max": 1, "per": "1m"}}, "zzzzzz": 1}"#,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            said,
            "task config has unknown keys: 'limit' (did you mean 'limits'?), 'zzzzzz', \
             'mcp.enabeld' (did you mean 'enabled'?), 'mcp.alowed_server_ids' (did you mean 'allowed_server_ids'?), \
             'limits.wal_ms' (did you mean 'wall_ms'?), 'quota.tool_call' (did you mean 'tool_calls'?); \
             docs/tasks.md lists every key"
        );
        // Every key the docs' example uses is known.
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tasks.md"))
                .unwrap();
        let start = docs.find("## The task config\n\n```json\n").unwrap()
            + "## The task config\n\n```json\n".len();
        let example = &docs[start..start + docs[start..].find("```").unwrap()];
        let value: serde_json::Value = serde_json::from_str(example).unwrap();
        assert!(keys::unknown_keys(&value).is_empty());
    }

    #[test]
    fn each_mistake_is_named() {
        let cases = [
            (r#"{"mcp": {"enabeld": true}}"#, "enabeld"),
            (r#"{"mcp": {"task_tool_denylist": [""]}}"#, "empty pattern"),
            (
                r#"{"mcp": {"default_server_ids": ["fs"]}}"#,
                "not in mcp.allowed_server_ids",
            ),
            (r#"{"limits": {"memory_mb": 0}}"#, "limits.memory_mb"),
            (r#"{"limits": {"memory_mb": 4096}}"#, "use 1 to 256"),
            (r#"{"limits": {"wall_ms": 999999999}}"#, "limits.wall_ms"),
            (r#"{"llm": {"backend": 3}}"#, "invalid type"),
            (r#"{"wasi": {"env": {"A=B": "x"}}}"#, "wasi.env key"),
            (
                r#"{"wasi": {"env": {"TOKEN": "${API_KEY"}}}"#,
                "wasi.env.TOKEN has an unterminated",
            ),
            (
                r#"{"wasi": {"dirs": [{"host": "data", "guest": "/data"}]}}"#,
                "absolute paths",
            ),
            (
                r#"{"wasi": {"dirs": [{"host": "/a/../etc", "guest": "/d"}]}}"#,
                "'..'",
            ),
            (r#"{"wasi": {"preopens": []}}"#, "preopens"),
        ];
        for (config, needle) in cases {
            let error = check_task_spec(&spec(config)).unwrap_err().to_string();
            assert!(error.contains(needle), "{config}: {error}");
        }
        let mut bad = spec("{}");
        bad.module_sha256 = "A".repeat(64);
        assert!(check_task_spec(&bad)
            .unwrap_err()
            .to_string()
            .contains("module_sha256"));
        bad = spec("{}");
        bad.module_uri = "ftp://x".into();
        assert!(check_task_spec(&bad)
            .unwrap_err()
            .to_string()
            .contains("module_uri"));
        bad = spec("{}");
        bad.id = "a b".into();
        assert!(check_task_spec(&bad)
            .unwrap_err()
            .to_string()
            .contains("task id"));
    }
}
