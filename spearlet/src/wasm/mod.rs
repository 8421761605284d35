//! WASM guests: the wasmtime [`runtime`] (engine, linker, a store per run;
//! the entry point is [`GuestRuntime::run`]), the compiled-module [`cache`],
//! the guests' own [`threads`], guest [`cpu`] accounting, how a run ended
//! ([`outcome`], [`stop`]), and the cchat host API ([`host`]), which reaches
//! guest memory only through [`guest_memory`].

mod cache;
mod cpu;
mod guest_memory;
pub mod host;
mod outcome;
mod runtime;
mod stop;
mod threads;

pub use outcome::GuestOutcome;
pub use runtime::{
    hex, GuestLimits, GuestRuntime, LoadError, RunContext, MAX_GUEST_MEMORY, POOL_SLOTS,
};
pub use stop::StopReason;
