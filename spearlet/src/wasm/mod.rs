//! WASM guests: the wasmtime [`runtime`] (engine, linker, a store per run),
//! the compiled-module [`cache`], the guests' own [`threads`], guest [`cpu`]
//! accounting, why a run was [`stop`]ped, and the cchat host API ([`host`],
//! reaching guest memory only through [`guest_memory`]).

mod cache;
mod cpu;
mod guest_memory;
pub mod host;
mod runtime;
mod stop;
mod threads;

pub use runtime::{
    hex, GuestLimits, GuestOutcome, GuestRuntime, LoadError, RunContext, MAX_GUEST_MEMORY,
    POOL_SLOTS,
};
pub use stop::StopReason;
