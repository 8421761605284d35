//! Why the node stopped a guest run: the errors raised inside the guest
//! (from the epoch callback or a host call) so that wasmtime unwinds it,
//! and read back to tell the caller in one sentence.

use std::time::Duration;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StopReason {
    #[error("the guest used more than its CPU budget of {0:?} (limits.cpu_ms)")]
    Cpu(Duration),
    #[error("the guest exceeded its wall-clock limit of {0:?} (limits.wall_ms)")]
    Wall(Duration),
    /// A host call ended the run; the sentence is the host API's own.
    #[error("{0}")]
    Host(String),
    /// A fleet quota refused a model request (docs/quotas.md).
    #[error("{0}")]
    Quota(String),
}
