//! MCP on the node: resolving a server's references, running stdio servers
//! as supervised children, talking MCP over rmcp, and rendering what tools
//! return for a model.

mod acting;
mod bearer;
mod client;
mod elicitation;
mod error;
mod http;
mod input_required;
mod lifecycle;
mod listen;
mod options;
mod render;
mod schema;
mod sealed;
mod server_log;
mod sse;
mod standalone;
mod stdio;

pub use acting::{Delegation, OnBehalf};
pub(crate) use bearer::insufficient_scope;
pub use bearer::{auth_failure, Challenge, Credentials, TokenError, TokenSource};
pub use client::{stdio_command, McpClient, Timeouts, ToolList};
pub use elicitation::ElicitationPolicy;
pub use error::McpError;
pub use options::SessionOptions;
pub use render::{render_result, RenderedResult};
pub use schema::{check_input_schema, SchemaError};
pub use stdio::{Confined, Sandboxed, StdioChild, StdioCommand};
