//! WASM guests: the wasmtime [`runtime`] (engine and linker once, a store
//! per run; the entry point is [`GuestRuntime::run`]), what a store holds
//! ([`state`]), the compiled-module [`cache`], the guests' own [`threads`],
//! guest [`cpu`] accounting, how a run ended ([`outcome`], [`stop`]), and
//! [`guest_memory`], the only way host calls (`crate::cchat::host_api`)
//! reach a guest's memory.

mod cache;
mod cpu;
pub(crate) mod guest_memory;
mod outcome;
mod runtime;
mod state;
mod stop;
mod threads;

pub use outcome::GuestOutcome;
pub use runtime::{
    hex, GuestLimits, GuestRuntime, LoadError, RunContext, MAX_GUEST_MEMORY, POOL_SLOTS,
};
pub use state::GuestState;
pub use stop::StopReason;
