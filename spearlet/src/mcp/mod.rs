//! MCP on the node: resolving a server's references, running stdio servers
//! as supervised children, talking MCP over rmcp, and rendering what tools
//! return for a model.

mod client;
mod http;
mod render;
mod schema;
mod sse;
mod stdio;

pub use client::{stdio_command, McpClient, McpError, Timeouts};
pub use render::{render_result, RenderedResult};
pub use schema::{check_input_schema, SchemaError};
pub use stdio::{StdioChild, StdioCommand};
