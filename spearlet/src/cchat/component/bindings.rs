//! The Rust side of `wit/spear-agent.wit`, generated: host traits for the
//! world's imports, and `Agent` to call its export. Every import is async
//! (a send waits for the model) and may trap (a budget that ends the run).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "spear:agent/agent",
    imports: { default: async | trappable },
    exports: { default: async },
    with: { "spear:agent/cchat.session": SessionHandle },
});

/// What a `session` resource stands for: the run's session of that
/// handle (its [`Resource::rep`](wasmtime::component::Resource::rep)).
pub struct SessionHandle;

pub use spear::agent::cchat::{Refusal, RefusalKind, SendMode};
