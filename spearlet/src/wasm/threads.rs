//! The threads guests run on, apart from the node's own work.
//!
//! Guest runs are spawned on a runtime of their own whose worker threads run
//! at a lower scheduling priority (nice 10). Registry sync, heartbeats, the
//! gRPC and HTTP endpoints and the MCP connections stay on the node's main
//! runtime, so a node whose every run slot holds a spinning guest still
//! answers its probes and keeps its heartbeats. Dropping a [`RunHandle`]
//! (a cancelled invocation) aborts the run at its next yield, which the
//! epoch callback forces at least every tick.
//!
//! A run started from one of these threads (the node serves its Invocation
//! service here) runs where it is, in the caller's task: the hop to another
//! thread, which costs more than the whole start of a cached guest, is only
//! paid by callers on the node's own threads.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(test)]
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tracing::warn;

/// Lower priority for guest threads: the kernel favours the node's own.
const GUEST_NICE: i32 = 10;

/// The guests' runtime.
pub struct GuestThreads {
    /// Taken only when dropped, to shut it down without blocking.
    runtime: Option<Runtime>,
    handle: tokio::runtime::Handle,
    /// Which runtime this is, as its threads know it.
    id: u64,
}

/// Numbers each guest runtime of the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The guest runtime this thread belongs to (0: none).
    static GUEST_RUNTIME: Cell<u64> = const { Cell::new(0) };
}

impl GuestThreads {
    /// `threads` workers (at least one).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("spear-guest")
            .on_thread_start(move || {
                GUEST_RUNTIME.with(|runtime| runtime.set(id));
                lower_priority();
            })
            .enable_all()
            .build()?;
        Ok(Self {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            id,
        })
    }

    /// The guests' runtime, to serve what should run beside the guests
    /// (the Invocation service).
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.handle.clone()
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
        if GUEST_RUNTIME.with(Cell::get) == self.id {
            return RunHandle(Run::Here(Box::pin(future)));
        }
        RunHandle(Run::Spawned(self.handle.spawn(future)))
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

/// A run: awaiting it gives its output; dropping it aborts the run.
pub struct RunHandle<T>(Run<T>);

enum Run<T> {
    /// On a guest thread, as a task of its own.
    Spawned(JoinHandle<T>),
    /// Already on a guest thread: polled in the caller's task.
    Here(Pin<Box<dyn Future<Output = T> + Send>>),
}

impl<T> Future for RunHandle<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            Run::Spawned(handle) => Pin::new(handle).poll(cx),
            Run::Here(future) => future.as_mut().poll(cx).map(Ok),
        }
    }
}

impl<T> Drop for RunHandle<T> {
    fn drop(&mut self) {
        // A run here ends with its future, dropped with this handle.
        if let Run::Spawned(handle) = &self.0 {
            handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    /// The thread a task on `from`'s threads runs on, and the one a run it
    /// starts on `threads` runs on.
    async fn started_from(
        from: &GuestThreads,
        threads: Arc<GuestThreads>,
    ) -> (std::thread::ThreadId, std::thread::ThreadId) {
        let task = async move {
            let caller = std::thread::current().id();
            let run = threads.spawn(async { std::thread::current().id() }).await;
            (caller, run.unwrap())
        };
        from.handle().spawn(task).await.unwrap()
    }

    #[tokio::test]
    async fn a_run_goes_to_the_guest_threads_unless_it_is_already_there() {
        let threads = Arc::new(GuestThreads::new(1).unwrap());
        let from_outside = threads.spawn(async { thread_name() }).await.unwrap();
        assert_eq!(from_outside, "spear-guest");

        let (caller, run) = started_from(&threads, Arc::clone(&threads)).await;
        assert_eq!(caller, run, "a run started on a guest thread stays there");

        // Another guest runtime's thread is not one of this one's.
        let other = GuestThreads::new(1).unwrap();
        let (caller, run) = started_from(&other, Arc::clone(&threads)).await;
        assert_ne!(caller, run, "a run from another runtime's thread hops");
    }
}
