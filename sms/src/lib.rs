//! SMS, Spear's control plane. A map, by concern:
//!
//! **The registry.** Operators declare MCP servers as JSON files in
//! `--mcp-dir`: [`files`] watches the directory and reconciles it, through
//! [`registry`] (parsing and checking server files, with problems named by
//! path), into the [`store`] (embedded memory or etcd) via the [`writer`];
//! [`admin`] is the same path for admin API writes.
//!
//! **Streaming it.** [`watch`] keeps the history and encodes each revision
//! once for every node's stream (the hub, and following the store);
//! [`grpc`] holds the thin tonic services over these cores (registry,
//! admin, nodes, tasks, status).
//!
//! **Nodes and tasks.** [`nodes`] tracks heartbeats (who is alive, what
//! each applied); [`tasks`] stores tasks and routes an invocation to a node.
//!
//! **OAuth and sealed values.** [`oauth`] holds one credential per server
//! behind OAuth for the whole cluster (sealed in the store), renews it once
//! across replicas, and gives nodes access tokens; `sms oauth` is its CLI.
//! [`sealed`] takes server files' literal `env`/`headers` values out of
//! the registry, sealed, and opens them for the nodes a server is for;
//! both seal with [`seal`]'s key.
//!
//! **Who calls.** Every port is mutual TLS with SPIFFE identities (or
//! plaintext on loopback / `--insecure`); `spear_identity` decides who may
//! call what, and [`certs`] is `sms certs`, a small CA for an installation;
//! [`revocations`] is the deny list `sms certs revoke` writes, which every
//! replica and node enforces.
//!
//! [`server`] builds it all; [`metrics`] serves Prometheus and, from
//! [`health`], the `/livez` and `/readyz` probes; [`cli`] is the
//! command line (`sms serve` and the client commands); `main.rs` only calls it.
#![forbid(unsafe_code)]

pub mod admin;
pub mod approvals;
pub mod audit;
pub mod certs;
pub mod cli;
pub mod console;
pub mod events;
pub mod files;
pub mod grpc;
pub mod health;
pub mod metrics;
pub mod nodes;
pub mod oauth;
pub mod pins;
pub mod quotas;
pub use spear_server_files as registry;
pub mod revocations;
pub mod seal;
pub mod sealed;
pub mod server;
pub mod store;
pub mod tasks;
pub mod watch;
pub mod writer;
