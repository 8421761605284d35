//! What a guest's store holds: its WASI context, its store limits, its CPU
//! clock, and the host state `H` of whatever API the embedder linked in
//! (the runtime never names it). One per run, dropped with the run.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime_wasi::p1::WasiP1Ctx;

use super::cpu::CpuClock;
use super::limiter::GuestLimiter;
use crate::node_policy::GrantedDir;

/// Everything a guest's store holds.
pub struct GuestState<H> {
    pub wasi: WasiP1Ctx,
    pub limits: GuestLimiter,
    /// Guest CPU used so far, shared with the epoch callback.
    pub cpu: Arc<CpuClock>,
    /// The embedder's host state (the chat sessions, for Spear's guests).
    pub host: H,
}

/// What a run is granted beyond stdio (nothing by default): checked by the
/// caller against the node's policy before it reaches the runtime.
#[derive(Debug, Clone, Default)]
pub struct Granted {
    pub args: Vec<String>,
    /// References resolved.
    pub env: BTreeMap<String, String>,
    /// Checked and opened.
    pub dirs: Vec<GrantedDir>,
}
