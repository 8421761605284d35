//! The spearlet, Spear's node agent.
//!
//! A node keeps a live copy of SMS's MCP server registry ([`sync`] into a
//! [`registry`] view swapped atomically), persists it in its state dir
//! ([`persist`]) so it keeps serving while SMS is away, reports what it
//! applied ([`heartbeat`]), and shows it all over HTTP ([`http`]).
//! [`node`] wires these together; `main.rs` only parses arguments.

pub mod cchat;
pub mod cli;
pub mod config;
pub mod connections;
pub mod explain;
pub mod heartbeat;
pub mod http;
pub mod invoke;
pub mod llm;
pub mod mcp;
pub mod node;
pub mod node_policy;
pub mod persist;
pub mod policy;
pub mod registry;
pub mod router;
pub mod sync;
pub mod tools;
pub mod wasm;
