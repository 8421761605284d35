//! The tools a model is offered and how its calls come back: `names.rs` gives
//! each MCP tool the name a model sees (DESIGN §3.4) and resolves a name the
//! model sends back to the one tool it stands for; the [`Router`] builds the
//! tool list of one model request under policy and executes the calls the
//! model makes against it, on the right server.

mod names;
mod router;

pub use names::{offered_name, valid_name, OfferedTools, ResolveError, ToolRef, MAX_NAME_LEN};
pub use router::{CallRefused, OfferedTool, Router, ToolOutcome, ToolSet};
