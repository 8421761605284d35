//! Why the node stopped a guest run: the errors the runtime raises inside
//! the guest (from the epoch callback or a host call) so that wasmtime
//! unwinds it, and reads back to tell the caller in one sentence.

use std::time::Duration;

use crate::cchat::BudgetError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StopReason {
    #[error("the guest used more than its CPU budget of {0:?} (limits.cpu_ms)")]
    Cpu(Duration),
    #[error("the guest exceeded its wall-clock limit of {0:?} (limits.wall_ms)")]
    Wall(Duration),
    #[error("the guest was stopped: {0}, and it kept asking after being refused")]
    Budget(BudgetError),
    /// A guest tool callback trapped, hit a limit or broke the dispatcher
    /// contract; `why` is what ended it.
    #[error("guest tool '{tool}' ended the run: {why}")]
    GuestTool { tool: String, why: String },
}
