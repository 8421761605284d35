//! Guests built as WebAssembly components, beside core modules: how the
//! runtime tells them apart ([`is_component`]), what a linked guest of
//! either kind is ([`Loaded`]), and what a component's store holds
//! ([`ComponentState`]): WASI p2 granting nothing but what the task
//! grants (stdio captured as for a module, clocks, random; no socket),
//! its resource table, and the same limits and CPU clock as a module's.
//!
//! The runtime still names no host API: the embedder links its world
//! ([`LinkComponent`]) and says how to enter it ([`EnterComponent`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use wasmtime::component::{InstancePre as ComponentPre, Linker as ComponentLinker, ResourceTable};
use wasmtime::{InstancePre, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::cpu::CpuClock;
use super::limiter::GuestLimiter;
use super::state::GuestState;

/// Whether `wasm` is a component (else a core module, or text).
pub fn is_component(wasm: &[u8]) -> bool {
    wasmparser::Parser::is_component(wasm)
}

/// What a run of a component's store holds.
pub struct ComponentState<H> {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limits: GuestLimiter,
    /// Guest CPU used so far, shared with the epoch callback.
    pub cpu: Arc<CpuClock>,
    /// The embedder's host state, as for a module.
    pub host: H,
}

impl<H: Send> WasiView for ComponentState<H> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A linked guest of either kind, ready to instantiate.
pub enum Loaded<H: 'static> {
    Module(InstancePre<GuestState<H>>),
    Component(ComponentPre<ComponentState<H>>),
}

impl<H> Clone for Loaded<H> {
    fn clone(&self) -> Self {
        match self {
            Loaded::Module(pre) => Loaded::Module(pre.clone()),
            Loaded::Component(pre) => Loaded::Component(pre.clone()),
        }
    }
}

/// Links a world's host side into the component linker (for Spear's
/// guests, `cchat::component::add_to_linker`).
pub type LinkComponent<H> = fn(&mut ComponentLinker<ComponentState<H>>) -> wasmtime::Result<()>;

/// The error a component's entry point returned, in its own words: the
/// run's standard error, with exit code 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GuestError(pub String);

/// What entering a component returns: its output, or its error; `Err` is
/// a trap or a limit.
pub type Entered = wasmtime::Result<Result<String, GuestError>>;

/// Instantiates a linked component in the store and calls its world's
/// entry point with the run's input.
pub type EnterComponent<H> = for<'a> fn(
    &'a ComponentPre<ComponentState<H>>,
    &'a mut Store<ComponentState<H>>,
    String,
) -> Pin<Box<dyn Future<Output = Entered> + Send + 'a>>;
