//! What one run's chat may use ([`ChatLimits`]: sessions, the auto loop's
//! defaults, the run's budgets) and why the cchat API ends a run
//! ([`ChatStop`], carried to the runtime as a [`StopReason::Host`]).

use super::budget::{BudgetError, BudgetLimits};
use crate::wasm::StopReason;

/// Why the cchat API ends a run, in the sentence the caller reads.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChatStop {
    #[error("the guest was stopped: {0}, and it kept asking after being refused")]
    Budget(BudgetError),
    /// A guest tool callback trapped, hit a limit or broke the dispatcher
    /// contract; `why` is what ended it.
    #[error("guest tool '{tool}' ended the run: {why}")]
    GuestTool { tool: String, why: String },
}

impl ChatStop {
    /// The runtime's stop, carrying this sentence.
    pub fn into_stop(self) -> StopReason {
        StopReason::Host(self.to_string())
    }
}

/// What one run's chat may use, beyond its wall clock: sessions, the
/// auto loop's defaults and the run's budgets.
#[derive(Debug, Clone, Copy)]
pub struct ChatLimits {
    pub max_sessions: usize,
    /// Per `cchat_send`.
    pub max_iterations: u32,
    /// Per `cchat_send`.
    pub max_total_tool_calls: u32,
    /// The run's budgets over every session and send.
    pub budget: BudgetLimits,
}

impl Default for ChatLimits {
    fn default() -> Self {
        ChatLimits {
            max_sessions: 64,
            max_iterations: 8,
            max_total_tool_calls: 32,
            budget: BudgetLimits {
                host_memory_bytes: 16 << 20,
                model_requests: 64,
                tokens: 1_000_000,
                tool_calls: 256,
            },
        }
    }
}
