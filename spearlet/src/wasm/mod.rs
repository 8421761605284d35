//! WASM guests: the wasmtime `runtime.rs` (engine and linker once, a store
//! per run; the entry point is [`GuestRuntime::run`]), what a store holds
//! (`state.rs`), the compiled-module `cache.rs`, the guests' own `threads.rs`,
//! guest `cpu.rs` accounting, how a run ended (`outcome.rs`, `stop.rs`), and
//! `guest_memory.rs`, the only way host calls (`crate::cchat::host_api`)
//! reach a guest's memory.

mod cache;
mod cpu;
pub(crate) mod guest_memory;
mod limiter;
mod outcome;
mod resources;
mod runtime;
mod state;
mod stop;
mod threads;

pub(crate) use outcome::describe;
pub use outcome::GuestOutcome;
pub use runtime::{
    hex, GuestLimits, GuestRuntime, LoadError, RunContext, MAX_GUEST_MEMORY, POOL_SLOTS,
};
pub use state::GuestState;
pub use stop::StopReason;
