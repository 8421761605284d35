//! Chat sessions for guests. For now: the auto tool-call loop that drives a
//! model with the session's allowed MCP tools until it answers.

mod tool_loop;

pub use tool_loop::{run_tool_loop, CallTrace, LoopError, LoopLimits, LoopOutcome};
