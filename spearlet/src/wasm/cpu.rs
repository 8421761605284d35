//! Guest CPU: how long a run has occupied a guest thread, summed over the
//! whole run and never refilled.
//!
//! A run is a future that wasmtime drives on a fiber; it occupies a thread
//! only while it is polled. [`Metered`] wraps that future and adds up the
//! time spent inside each poll into the run's [`CpuClock`]: guest code and
//! the host's own work for it (host calls are the guest's CPU too, or a
//! guest spinning on a cheap host call would never be stopped), but not the
//! time it waits for the model, an MCP tool or its turn on a thread.
//!
//! The epoch callback ([`CpuClock::check`]) runs at every epoch tick the
//! guest observes. It stops the run past its CPU budget or wall deadline,
//! and otherwise makes a guest that has held its thread for a whole tick
//! yield, so guests share their threads and timers fire.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmtime::UpdateDeadline;

use super::stop::StopReason;

#[derive(Debug, Default)]
struct Clock {
    /// Time in finished polls.
    used: Duration,
    /// When the current poll began, while the run is being polled.
    polled_since: Option<Instant>,
    /// When the epoch callback last ran.
    last_check: Option<Instant>,
}

/// The CPU a run has used; shared by [`Metered`] and the epoch callback.
#[derive(Debug, Default)]
pub struct CpuClock {
    clock: Mutex<Clock>,
}

impl CpuClock {
    /// CPU used so far, the current poll included.
    pub fn used(&self) -> Duration {
        let clock = self.clock.lock();
        clock.used + clock.polled_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// The epoch callback: stop the run, let it go on, or make it yield.
    pub fn check(
        &self,
        budget: Duration,
        wall: Duration,
        deadline: Instant,
    ) -> Result<UpdateDeadline, StopReason> {
        let now = Instant::now();
        let mut clock = self.clock.lock();
        let polled_since = clock.polled_since;
        let used = clock.used + polled_since.map_or(Duration::ZERO, |t| now - t);
        if used > budget {
            return Err(StopReason::Cpu(budget));
        }
        if now >= deadline {
            return Err(StopReason::Wall(wall));
        }
        // Resumed since the last check: the tick passed while it waited, so
        // it gets a tick of running before it yields again.
        let resumed = match (polled_since, clock.last_check) {
            (Some(since), Some(last)) => since > last,
            _ => true,
        };
        clock.last_check = Some(now);
        Ok(if resumed {
            UpdateDeadline::Continue(1)
        } else {
            UpdateDeadline::Yield(1)
        })
    }

    fn enter(&self) {
        self.clock.lock().polled_since = Some(Instant::now());
    }

    fn leave(&self) {
        let mut clock = self.clock.lock();
        if let Some(since) = clock.polled_since.take() {
            clock.used += since.elapsed();
        }
    }
}

/// A future whose polls are charged to a [`CpuClock`].
pub struct Metered<F> {
    future: Pin<Box<F>>,
    clock: Arc<CpuClock>,
}

impl<F: Future> Metered<F> {
    pub fn new(future: F, clock: Arc<CpuClock>) -> Self {
        Self {
            future: Box::pin(future),
            clock,
        }
    }
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        this.clock.enter();
        let result = this.future.as_mut().poll(cx);
        this.clock.leave();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_is_not_charged_and_polling_is() {
        let clock = Arc::new(CpuClock::default());
        // Busy for 30 ms inside one poll.
        Metered::new(
            async {
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(30) {}
            },
            Arc::clone(&clock),
        )
        .await;
        let busy = clock.used();
        assert!(busy >= Duration::from_millis(30), "{busy:?}");
        // Waiting on a timer (nothing polled) costs nothing.
        tokio::time::pause();
        Metered::new(
            tokio::time::sleep(Duration::from_secs(5)),
            Arc::clone(&clock),
        )
        .await;
        assert!(
            clock.used() - busy < Duration::from_millis(20),
            "{:?}",
            clock.used()
        );
    }

    #[test]
    fn the_check_stops_past_the_budget_or_the_deadline() {
        let clock = CpuClock::default();
        let far = Instant::now() + Duration::from_secs(60);
        clock.enter();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(5) {}
        assert!(matches!(
            clock.check(Duration::from_millis(1), Duration::from_secs(60), far),
            Err(StopReason::Cpu(_))
        ));
        let past = Instant::now();
        assert!(matches!(
            clock.check(Duration::from_secs(10), Duration::from_secs(1), past),
            Err(StopReason::Wall(_))
        ));
    }

    #[test]
    fn a_guest_that_held_its_thread_for_a_tick_yields() {
        let clock = CpuClock::default();
        let far = Instant::now() + Duration::from_secs(60);
        let budget = Duration::from_secs(10);
        clock.enter();
        // First check after being polled: it just resumed.
        assert!(matches!(
            clock.check(budget, budget, far),
            Ok(UpdateDeadline::Continue(1))
        ));
        // Still in the same poll at the next tick: yield.
        assert!(matches!(
            clock.check(budget, budget, far),
            Ok(UpdateDeadline::Yield(1))
        ));
        clock.leave();
        clock.enter();
        assert!(matches!(
            clock.check(budget, budget, far),
            Ok(UpdateDeadline::Continue(1))
        ));
    }
}
