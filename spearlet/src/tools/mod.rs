//! How MCP tools are named for a model (DESIGN §3.4) and how a name the model
//! sends back is resolved to the one tool it stands for.

mod names;

pub use names::{offered_name, OfferedTools, ResolveError, MAX_NAME_LEN};
