//! Tasks: guest modules with their config, registered by operators and run
//! on nodes ([`invoke`]). Kept apart from the registry: tasks are not
//! streamed to nodes; a node receives the task with each invocation, or asks
//! SMS for it.

mod etcd;
pub mod invoke;
mod memory;

use async_trait::async_trait;
use spear_proto::v1::TaskSpec;

pub use etcd::EtcdTaskStore;
pub use invoke::{InvokeError, Invoker};
pub use memory::MemoryTaskStore;

/// Why a task operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    Invalid(#[from] spear_proto::task::TaskError),
    #[error("no task '{0}' is registered; `sms tasks list` shows the ones that are")]
    NotFound(String),
    #[error("SMS already holds {0} tasks; delete unused ones first")]
    TooMany(usize),
    #[error("task store unavailable: {0}")]
    Unavailable(String),
    #[error("the task store holds a corrupt task at {key}: {reason}")]
    Corrupt { key: String, reason: String },
}

/// Most tasks one SMS holds.
pub const MAX_TASKS: usize = 10_000;

/// Where SMS keeps tasks: in memory, or in etcd next to the registry.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Creates or replaces the task with `spec.id`.
    async fn put(&self, spec: TaskSpec) -> Result<(), TaskError>;
    async fn get(&self, id: &str) -> Result<TaskSpec, TaskError>;
    /// Every task, by id.
    async fn list(&self) -> Result<Vec<TaskSpec>, TaskError>;
    /// Removes the task; [`TaskError::NotFound`] when there is none.
    async fn delete(&self, id: &str) -> Result<(), TaskError>;
}

/// Checks a spec before it is stored; the error names the field and the fix.
pub fn validate(spec: &TaskSpec) -> Result<(), TaskError> {
    spear_proto::task::check_task_spec(spec)
        .map(|_| ())
        .map_err(TaskError::Invalid)
}
