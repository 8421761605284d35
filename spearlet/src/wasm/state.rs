//! What a guest's store holds: its WASI context, its store limits, its
//! chat sessions and its CPU clock. One per run, dropped with the run.

use std::sync::Arc;

use wasmtime_wasi::p1::WasiP1Ctx;

use super::cpu::CpuClock;
use super::limiter::GuestLimiter;
use crate::cchat::Sessions;

/// Everything a guest's store holds.
pub struct GuestState {
    pub wasi: WasiP1Ctx,
    pub limits: GuestLimiter,
    pub cchat: Sessions,
    /// Guest CPU used so far, shared with the epoch callback.
    pub cpu: Arc<CpuClock>,
    /// The sentence of the last refused cchat call, for `cchat_last_error`.
    pub last_error: Option<String>,
}
