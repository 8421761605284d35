//! WASM guests: the wasmtime `runtime.rs` (engine and linker once, a store
//! per run; the entry point is [`GuestRuntime::run`]), what a store holds
//! (`state.rs`) and may use (`limits.rs`), the compiled-module `cache.rs`, the guests' own `threads.rs`,
//! guest `cpu.rs` accounting, how a run ended (`outcome.rs`, `stop.rs`), and
//! `guest_memory.rs`, the only way host calls reach a guest's memory.
//! Components run beside modules: `component.rs` (what their store holds,
//! which kind a binary is) and `component_run.rs` (one run).
//!
//! The runtime is generic over its host state `H` and never names a host
//! API: the embedder links one in ([`LinkHost`]; Spear's is `cchat`) and
//! gets its state back in the [`GuestOutcome`]. `invoke` puts the two
//! together.

mod cache;
mod compile;
mod component;
mod component_run;
mod cpu;
pub(crate) mod guest_memory;
mod limiter;
mod limits;
mod outcome;
mod resources;
mod runtime;
mod state;
mod stop;
mod store;
mod threads;

pub use component::{
    is_component, ComponentState, EnterComponent, Entered, GuestError, LinkComponent, Loaded,
};
pub use limits::{GuestLimits, MAX_GUEST_MEMORY};
pub(crate) use outcome::describe;
pub use outcome::GuestOutcome;
pub use runtime::{hex, GuestRuntime, LinkHost, LoadError, StartCosts, POOL_SLOTS};
pub use state::{Granted, GuestState};
pub use stop::StopReason;
pub use store::GuestRun;
