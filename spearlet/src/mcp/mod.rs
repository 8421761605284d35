//! MCP on the node: resolving a server's references, running stdio servers
//! as supervised children, talking MCP over rmcp, and rendering what tools
//! return for a model.

mod acting;
mod auth_failure;
mod bearer;
mod client;
mod client_side;
mod elicitation;
mod error;
mod http;
mod input_required;
mod lifecycle;
mod list_bound;
mod listen;
mod options;
mod relay;
mod render;
mod request_error;
mod schema;
mod sealed;
mod server_log;
mod server_requests;
mod sse;
mod standalone;
mod stdio;
mod stdio_frames;
mod stream_budget;
mod timeouts;
mod way_back;

pub use acting::{Delegation, OnBehalf};
pub use auth_failure::auth_failure;
pub(crate) use auth_failure::insufficient_scope;
pub use bearer::{Challenge, Credentials, TokenError, TokenSource};
pub use client::{stdio_command, McpClient, Timeouts, ToolList};
pub use elicitation::ElicitationPolicy;
pub use error::McpError;
pub use list_bound::DEFAULT_MAX_TOOLS;
pub use options::SessionOptions;
pub use render::{render_result, RenderedResult};
pub use schema::{check_input_schema, SchemaError};
pub use server_requests::MAX_REQUESTS_PER_SECOND;
pub use stdio::{Confined, Sandboxed, StdioChild, StdioCommand};
pub use stream_budget::{MAX_BYTES as MAX_STREAM_BYTES, MAX_EVENTS as MAX_STREAM_EVENTS};
pub use way_back::{WayBack, WAY_BACK};
