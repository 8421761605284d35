//! Chat for guests, from the host call to the model and back.
//!
//! - `host_api.rs`: the `cchat_*` functions a guest imports (entry point
//!   [`add_to_linker`]); they read guest memory and call into
//! - `sessions.rs`: the run's chat sessions and what each call does;
//!   `send.rs` runs a send and keeps its reply, `call_tool.rs` runs a
//!   guest-driven tool call;
//! - `request_params.rs`: the session's request params (`model`,
//!   `temperature`, `response_format`, the loop limits), checked;
//!   `models.rs`: which backend and model a session may pick;
//! - `state.rs`: what a guest's store holds for them;
//! - `component/`: the same API for guests built as components, as the
//!   WIT world `wit/spear-agent.wit` says it;
//! - `history.rs`: what a history must look like before it is sent;
//! - `guest_tools.rs`: tools the guest implements, and `dispatch.rs`, which
//!   calls them back through the guest's exported dispatcher;
//! - `tool_loop.rs`: one send against the model, the automatic tool-call
//!   loop included, as a state machine (`ask.rs`, `calls.rs` its branches);
//! - [`budget`]: what the whole run may cost, drawn on by every session and
//!   every send; `limits.rs`: the run's chat limits and why cchat stops a
//!   run.

pub mod budget;
mod call_tool;
pub mod component;
mod dispatch;
mod guest_tools;
mod history;
mod host_api;
mod limits;
mod models;
pub mod request_params;
mod send;
mod sessions;
mod state;
mod tool_loop;

pub use budget::{BudgetError, BudgetKind, BudgetLimits, RunBudget, Strike};
pub use guest_tools::{
    GuestCallbacks, GuestResult, GuestStopped, GuestTool, GuestTools, NoCallbacks,
};
pub use host_api::add_to_linker;
pub use limits::{ChatLimits, ChatStop};
pub use models::{Chosen, ModelRefused, Models};
pub use send::SendJob;
pub use sessions::{CallError, SessionDeps, Sessions};
pub use state::{ChatHost, ChatState};
pub use tool_loop::{
    run_send, run_tool_loop, CallTrace, LoopError, LoopLimits, LoopOutcome, SendMode, SendSetup,
};
