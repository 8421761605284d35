//! The threads guests run on, apart from the node's own work.
//!
//! Guest runs are spawned on a runtime of their own whose worker threads run
//! at a lower scheduling priority (nice 10). Registry sync, heartbeats, the
//! gRPC and HTTP endpoints and the MCP connections stay on the node's main
//! runtime, so a node whose every run slot holds a spinning guest still
//! answers its probes and keeps its heartbeats. Dropping a [`RunHandle`]
//! (a cancelled invocation) aborts the run at its next yield, which the
//! epoch callback forces at least every tick.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tracing::warn;

/// Lower priority for guest threads: the kernel favours the node's own.
const GUEST_NICE: i32 = 10;

/// The guests' runtime.
pub struct GuestThreads {
    runtime: Option<Runtime>,
}

impl GuestThreads {
    /// `threads` workers (at least one).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("spear-guest")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        Ok(Self {
            runtime: Some(runtime),
        })
    }

    /// Runs `future` on a guest thread, inside the caller's span (the
    /// run's), so what the guest does is logged and traced as part of it.
    pub fn spawn<F>(&self, future: F) -> RunHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        use tracing::Instrument;
        let future = future.instrument(tracing::Span::current());
        let handle = match &self.runtime {
            Some(runtime) => runtime.spawn(future),
            // Only while being dropped; never seen by a caller.
            None => tokio::spawn(future),
        };
        RunHandle(handle)
    }
}

impl Drop for GuestThreads {
    fn drop(&mut self) {
        // Dropping a runtime blocks; the node may be inside async code.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn lower_priority() {
    // SAFETY: setpriority on the calling thread (a tid on Linux) with
    // plain integer arguments; failure only leaves the priority as it was.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, GUEST_NICE) != 0 {
            warn!("cannot lower the priority of a guest thread");
        }
    }
}

/// A spawned run: awaiting it gives its output; dropping it aborts the run.
pub struct RunHandle<T>(JoinHandle<T>);

impl<T> Future for RunHandle<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for RunHandle<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
