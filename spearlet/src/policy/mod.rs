//! MCP policy (DESIGN §3.3): three layers, each can only narrow the one
//! above, deny always wins. Pure functions, so the same predicate serves the
//! tool list of a request, the re-check before each call and `explain`.

mod decide;
mod params;
mod task_config;

#[cfg(test)]
mod tests;

pub use decide::{server_verdict, tool_verdict, Layer, Verdict};
pub use params::{get_param, is_mcp_key, set_param, ParamError, SessionPolicy, TaskPolicy};
pub use task_config::parse_task_config;
