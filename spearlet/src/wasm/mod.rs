//! WASM guests: the wasmtime runtime ([`runtime`]) and the cchat host API
//! ([`host`]) that lets an untrusted guest drive a model with the MCP tools
//! its task allows.

pub mod host;
mod runtime;

pub use runtime::{
    hex, GuestLimits, GuestOutcome, GuestRuntime, LoadError, RunContext, MAX_GUEST_MEMORY,
    POOL_SLOTS,
};
