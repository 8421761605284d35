//! Which servers and tools a session sees (docs/mcp-on-nodes.md, "Policy"): three layers (server, task, session), each can
//! only narrow the one above, deny always wins. The verdicts (`decide.rs`)
//! are pure functions, so the same predicate serves the tool list of a
//! request, the re-check before each call and `tools::explain`, which
//! shows an operator every server and tool with the layer and rule that
//! decided it. This folder decides what a session may see; what a node
//! lets its tasks use (environment, directories, egress, modules) is
//! `node_policy`.

mod decide;
mod params;
mod task_config;

#[cfg(test)]
mod tests;

pub use decide::{approval_rule, server_verdict, tool_verdict, Layer, Verdict};
pub use params::{get_param, is_mcp_key, set_param, ParamError, SessionPolicy, TaskPolicy};
pub use spear_guest::params::ToolSearch;
pub use task_config::parse_task_config;
