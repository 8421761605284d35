//! Counters of guest runs, for heartbeats, `/status` and `/metrics`, and
//! whether the node still takes runs (it stops when it drains).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spear_common::metrics::Histogram;
use tokio::sync::{watch, Notify};

use super::RunOutcome;

/// What the node's guest runs have done since it started.
#[derive(Debug)]
pub struct RunStats {
    /// Runs in progress.
    pub running: AtomicU32,
    /// Runs that exited with code 0.
    pub ok: AtomicU64,
    /// Runs that exited with another code.
    pub failed: AtomicU64,
    /// Runs ended by a trap or a limit (CPU, memory, wall clock, stack).
    pub stopped: AtomicU64,
    /// Auto tool-call loop iterations (model requests) across all runs.
    pub loop_iterations: AtomicU64,
    /// Calls of guests' own tools that answered (MCP calls are counted
    /// per server).
    pub guest_tool_ok: AtomicU64,
    /// Guest tool calls the model was shown an error for.
    pub guest_tool_errors: AtomicU64,
    /// Set when the node drains: new runs are refused, readiness goes
    /// false, and heartbeats tell SMS to route elsewhere (they wake on it).
    pub draining: watch::Sender<bool>,
    /// Told when the last run in progress ends.
    idle: Notify,
    /// How long runs took (queueing excluded), whatever their outcome.
    pub run_seconds: Histogram,
    /// How long model requests took, across runs.
    pub model_seconds: Histogram,
}

impl Default for RunStats {
    fn default() -> Self {
        RunStats {
            running: AtomicU32::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            stopped: AtomicU64::new(0),
            loop_iterations: AtomicU64::new(0),
            guest_tool_ok: AtomicU64::new(0),
            guest_tool_errors: AtomicU64::new(0),
            draining: watch::Sender::new(false),
            idle: Notify::new(),
            run_seconds: spear_common::metrics::seconds_histogram(),
            model_seconds: spear_common::metrics::seconds_histogram(),
        }
    }
}

impl RunStats {
    pub fn record(&self, outcome: &RunOutcome) {
        let counter = match outcome.exit_code {
            Some(0) => &self.ok,
            Some(_) => &self.failed,
            None => &self.stopped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.run_seconds.observe(outcome.duration.as_secs_f64());
        for latency in &outcome.model_latency {
            self.model_seconds.observe(latency.as_secs_f64());
        }
        self.loop_iterations
            .fetch_add(u64::from(outcome.iterations), Ordering::Relaxed);
        for call in outcome.trace.iter().filter(|t| t.guest_tool.is_some()) {
            let counter = if call.is_error {
                &self.guest_tool_errors
            } else {
                &self.guest_tool_ok
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a run in progress until the guard is dropped.
    pub fn start(&self) -> RunningGuard<'_> {
        self.running.fetch_add(1, Ordering::AcqRel);
        RunningGuard(self)
    }

    pub fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    /// Waits until no run is in progress.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Returned by [`RunStats::start`].
pub struct RunningGuard<'a>(&'a RunStats);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}
