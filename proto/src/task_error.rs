//! Why a task spec or config is refused: one sentence each, naming the key
//! and what to write instead. SMS shows it to the operator who registered
//! the task; a node answers an invocation with it.

use thiserror::Error;

/// Longest accepted task id.
pub const MAX_TASK_ID_LEN: usize = 128;
/// Largest accepted task config.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TaskError {
    #[error("task id is empty; name the task (letters, digits, '-', '_', '.')")]
    EmptyId,
    #[error("task id is {len} bytes long; the limit is {MAX_TASK_ID_LEN}")]
    LongId { len: usize },
    #[error("task id contains {bad:?}; use letters, digits, '-', '_' and '.'")]
    IdChar { bad: char },
    #[error("module_uri '{uri}' is not file:///absolute/path or http(s)://...")]
    ModuleUri { uri: String },
    #[error("module_sha256 must be 64 lowercase hex digits (sha256sum prints it)")]
    ModuleSha,
    #[error("description is over 1024 bytes")]
    LongDescription,
    #[error("task config is {len} bytes; the limit is {MAX_CONFIG_BYTES}")]
    LargeConfig { len: usize },
    #[error("task config is invalid: {0}")]
    Json(String),
    #[error("task config has unknown keys: {0}; docs/tasks.md lists every key")]
    UnknownKeys(String),
    #[error("task config: {0}")]
    Quota(crate::quota::QuotaError),
    #[error("task config: invokers: {0}")]
    Invoker(crate::principal::InvokerError),
    #[error("task config: pattern '{pattern}' {why}")]
    Pattern {
        pattern: String,
        why: crate::patterns::PatternError,
    },
    #[error("task config: mcp.default_server_ids has '{id}', which is not in mcp.allowed_server_ids; add it there or remove it")]
    DefaultNotAllowed { id: String },
    #[error("task config: limits.{name} is {value}; use 1 to {max}")]
    Limit {
        name: &'static str,
        value: u64,
        max: u64,
    },
    #[error("task config: wasi grants at most 256 args, 256 env vars and 16 dirs")]
    TooManyGrants,
    #[error("task config: wasi.env key '{key}' is not a variable name (non-empty, no '=' or NUL)")]
    EnvKey { key: String },
    #[error("task config: wasi.env.{key} {why}")]
    EnvValue { key: String, why: String },
    #[error(
        "task config: wasi.dirs entry {host} -> {guest} must use absolute paths on both sides"
    )]
    RelativeDir { host: String, guest: String },
    #[error("task config: wasi.dirs host path {host} must not contain '..'")]
    DotDotDir { host: String },
    /// Any of the above, about the named task.
    #[error("task {task}: {error}")]
    InTask { task: String, error: Box<TaskError> },
}

impl TaskError {
    /// This error, said about `task`.
    pub fn in_task(self, task: &str) -> TaskError {
        TaskError::InTask {
            task: task.to_string(),
            error: Box::new(self),
        }
    }
}
