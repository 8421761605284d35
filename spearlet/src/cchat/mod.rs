//! Chat for guests, from the host call to the model and back.
//!
//! - `host_api.rs`: the `cchat_*` functions a guest imports (entry point
//!   [`add_to_linker`]); they read guest memory and call into
//! - `sessions.rs`: the run's chat sessions, what each call does, and the
//!   reply the guest reads back;
//! - `tool_loop.rs`: the automatic tool-call loop that drives a model with a
//!   session's allowed MCP tools until it answers;
//! - [`budget`]: what the whole run may cost, drawn on by every session and
//!   every send.

pub mod budget;
mod host_api;
mod sessions;
mod tool_loop;

pub use budget::{BudgetError, BudgetKind, BudgetLimits, RunBudget, Strike};
pub use host_api::add_to_linker;
pub use sessions::{CallError, SessionDeps, Sessions};
pub use tool_loop::{run_tool_loop, CallTrace, LoopError, LoopLimits, LoopOutcome};
