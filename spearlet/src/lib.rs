//! The spearlet, Spear's node agent. A map, by concern:
//!
//! **Following the registry.** [`sync`] watches SMS and applies snapshots
//! and deltas into a [`registry`] view that is swapped atomically;
//! [`persist`] keeps the last good registry and the `applied.log` in the
//! state dir so the node serves while SMS is away; [`heartbeat`] reports
//! what was applied; [`http_endpoint`] shows it all (`/registry`,
//! `/status`, `/metrics`); [`revocations`] follows the certificates SMS
//! revoked, which the Invocation port then refuses.
//!
//! **Reaching MCP servers.** [`connections`] keeps one supervised
//! connection per enabled server (reconnecting with `spear_common`'s
//! backoff); [`mcp`] is the protocol side (stdio children, Streamable HTTP
//! and legacy SSE transports, rendering results for a model);
//! [`env_refs`] resolves `${NAME}` references from the node's environment;
//! [`http_client`] is the one outbound HTTP client.
//!
//! **Deciding what a session may use.** [`tool_policy`] decides which
//! servers and tools a session sees (three layers: server, task, session);
//! [`node_policy`] decides what the operator lets tasks and servers take
//! from this node (dirs, env, egress, modules, models); [`tools`] applies
//! the first to build a request's tools, routes the model's calls back,
//! explains each verdict (`tools::explain`) and, for sessions with many
//! tools, offers a search over them ([`tool_index`] ranks them).
//!
//! **Running guests.** [`invoke`] is the gRPC Invocation service (where a
//! task comes from, grants, limits, run slots, module loading) and puts the
//! runtime and the host API together; [`wasm`] runs a guest in wasmtime
//! with its CPU, memory and wall-clock limits, generic over its host
//! state; [`cchat`] is the host API the guest calls, its sessions, the
//! tool loop and the run's budget; [`llm`] speaks to model providers.
//! [`sms_link`] is the node's one link to SMS, which sync, heartbeats,
//! task fetches, tokens and revocations share.
//!
//! [`node`] builds every subsystem and shuts them down in order; [`cli`]
//! parses the command line (`main.rs` only calls it); [`config`] is the
//! node's TOML file.
// Unsafe only where a comment says why it holds (three places).
#![deny(unsafe_code)]

pub mod cchat;
pub mod cli;
pub mod config;
pub mod connections;
pub mod env_refs;
pub mod heartbeat;
pub mod http_client;
pub mod http_endpoint;
pub mod invoke;
pub mod llm;
pub mod mcp;
pub mod node;
pub mod node_policy;
pub mod northbound;
pub mod persist;
pub mod quota;
pub mod registry;
pub mod revocations;
pub mod sandbox;
pub mod sms_link;
pub mod sms_tokens;
pub mod sync;
pub mod tool_index;
pub mod tool_policy;
pub mod tools;
pub mod trust;
pub mod wasm;
