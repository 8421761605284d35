//! SMS, Spear's control plane.
//!
//! SMS owns the registry of MCP servers that operators declare as JSON files
//! in `--mcp-dir` (or through the admin API), keeps it in a [`store`]
//! (embedded memory or etcd), and streams it to every spearlet over the gRPC
//! watch protocol ([`watch`]). [`server`] wires the parts together; the
//! binary in `main.rs` only parses arguments.

pub mod admin;
pub mod cli;
pub mod files;
pub mod grpc;
pub mod metrics;
pub mod nodes;
pub mod registry;
pub mod server;
pub mod store;
pub mod tasks;
pub mod watch;
pub mod writer;
