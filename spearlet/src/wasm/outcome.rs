//! How a guest run ended: its outcome, and the one sentence that says why
//! a run was stopped, read back from the error wasmtime unwound it with.

use std::time::{Duration, Instant};

use super::stop::StopReason;

/// How a run ended, with the host state back from its store.
#[derive(Debug)]
pub struct GuestOutcome<H> {
    /// The guest's exit code (0 when `main` returned).
    pub exit_code: Option<i32>,
    /// Why the run was ended, when it did not exit by itself.
    pub error: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub duration: Duration,
    /// Guest CPU the run used.
    pub cpu: Duration,
    /// The host state as the run left it; `None` only when the guest's
    /// thread failed and took the store with it.
    pub host: Option<H>,
}

impl<H> GuestOutcome<H> {
    pub(super) fn stopped(error: String, started: Instant, host: Option<H>) -> Self {
        GuestOutcome {
            exit_code: None,
            error: Some(error),
            stdout: Vec::new(),
            stderr: Vec::new(),
            duration: started.elapsed(),
            cpu: Duration::ZERO,
            host,
        }
    }
}

/// Whether `error` ended a guest that was running (an exit, a stop, a
/// trap), rather than one that never started.
pub(crate) fn ran(error: &wasmtime::Error) -> bool {
    error.downcast_ref::<wasmtime_wasi::I32Exit>().is_some()
        || error.downcast_ref::<StopReason>().is_some()
        || error.downcast_ref::<wasmtime::Trap>().is_some()
}

/// An exit code, or one sentence on why the guest was stopped.
pub(crate) fn describe(error: &wasmtime::Error) -> (Option<i32>, Option<String>) {
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return (Some(exit.0), None);
    }
    if let Some(stop) = error.downcast_ref::<StopReason>() {
        return (None, Some(stop.to_string()));
    }
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        let why = match trap {
            wasmtime::Trap::Interrupt => "the guest used more than its CPU budget".to_string(),
            wasmtime::Trap::StackOverflow => {
                "the guest overflowed its stack (too deep recursion)".to_string()
            }
            wasmtime::Trap::MemoryOutOfBounds => {
                "the guest accessed memory out of bounds".to_string()
            }
            wasmtime::Trap::AllocationTooLarge => {
                "the guest tried to grow its memory past its limit".to_string()
            }
            other => format!("the guest trapped: {other}"),
        };
        let backtrace = error
            .downcast_ref::<wasmtime::WasmBacktrace>()
            .map(|b| format!("\n{b}"))
            .unwrap_or_default();
        return (None, Some(format!("{why}{backtrace}")));
    }
    let text = format!("{error:#}");
    if text.contains("memory") && text.contains("limit")
        || text.contains("forcing trap when growing memory")
    {
        return (
            None,
            Some("the guest tried to grow its memory past its limit".into()),
        );
    }
    (None, Some(format!("the guest failed: {text}")))
}
