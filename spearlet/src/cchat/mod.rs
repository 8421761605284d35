//! Chat sessions for guests: the auto tool-call loop ([`tool_loop`]) that
//! drives a model with the session's allowed MCP tools until it answers,
//! and the run's [`budget`] that every session and send draws from.

pub mod budget;
mod tool_loop;

pub use budget::{BudgetError, BudgetKind, BudgetLimits, RunBudget, Strike};
pub use tool_loop::{run_tool_loop, CallTrace, LoopError, LoopLimits, LoopOutcome};
