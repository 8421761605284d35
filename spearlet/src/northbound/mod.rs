//! The northbound side: a virtual server (docs/virtual-servers.md) served
//! as one MCP server to the clients people use, over Streamable HTTP, with
//! every list and call decided by the node's own router, the code guests'
//! sessions go through.
//!
//! - [`VirtualTools`] (`listing.rs`): what a virtual server offers and
//!   what each of its names stands for, from the router's usable servers
//!   under the same task and session policy a guest gets.
//! - [`VirtualServer`] (`handler.rs`): rmcp's `ServerHandler` over it:
//!   `tools/list`, and `tools/call` through the router's call path (policy
//!   checked again, approvals, quotas, the server's credentials redacted
//!   from the result). A tool it does not offer, for whatever reason,
//!   answers exactly as a name nobody has.
//! - [`serve`] (`listen.rs`): the HTTP listener, both protocol generations
//!   (rmcp's Streamable HTTP server: 2025-11-25 sessions, 2026-07-28
//!   stateless), at `/v/<name>/mcp`.

mod call;
mod changes;
mod handler;
mod listen;
mod listing;
mod others;
mod relayed;
mod request_state;
mod result;
mod template;
mod watcher;
mod way_back;

pub use handler::VirtualServer;
pub use listen::{serve, Listening, ServeError};
pub use listing::{Listing, VirtualTools};
