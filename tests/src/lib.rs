//! Helpers shared by the end-to-end tests and benchmarks: starting the real
//! `sms` and `spearlet` binaries and a real etcd, and waiting for what they
//! should eventually show.
#![forbid(unsafe_code)]

pub mod audit_trail;
pub mod certs;
pub mod components;
pub mod console;
pub mod etcd;
pub mod fixtures;
pub mod fs_node;
pub mod guest_node;
pub mod guest_wat;
pub mod history;
pub mod http;
pub mod invoke;
pub mod mcp_cli;
pub mod netns;
pub mod node_join;
pub mod peers;
pub mod people;
pub mod plane;
pub mod procs;
pub mod tasks;
pub mod trust;
pub mod wait;

/// A two-thread Tokio runtime for tests that talk gRPC themselves.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}
