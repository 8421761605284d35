//! The tools a model is offered and how its calls come back: the [`Router`]
//! builds the tool list of one model request under policy and executes the
//! calls the model makes against it, on the right server; [`explain`] shows
//! an operator why a session sees each server and tool; [`search`] offers
//! a session with many tools a search over them instead. The name a model
//! sees for each MCP tool (docs/mcp-on-nodes.md, "Tool names") is given when a connection lists
//! its tools (`connections::names`).

mod approval;
mod explain;
mod relay;
mod router;
pub mod search;
mod usable;

pub use crate::connections::names::{
    offered_name, valid_name, OfferedTools, ResolveError, ToolRef, MAX_NAME_LEN,
};
pub use approval::ApprovalNote;
pub use explain::{explain, Explanation, ServerExplanation};
pub use router::{Allowed, CallRefused, OfferedTool, Router, ToolOutcome, ToolSet};
pub use search::{Search, SEARCH_TOOL};
pub use usable::Usable;
