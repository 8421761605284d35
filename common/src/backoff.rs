//! Jittered exponential backoff, the one every retry loop in Spear uses.
//!
//! SMS uses it to re-follow etcd, nodes to reconnect to SMS and to their
//! MCP servers, and the test harness's reconnect storm to behave as nodes
//! do. Delays double from `base` up to `max`; each is drawn uniformly from
//! the upper half of its step ("equal jitter"), so a thousand clients that
//! failed at the same moment spread out instead of retrying in lockstep,
//! while none retries sooner than half its step.

use std::time::Duration;

use rand::Rng;

/// Delays doubling from `base` to `max`, jittered; [`Backoff::reset`] after
/// a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            attempt: 0,
        }
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let step = self
            .base
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = step / 2;
        half + rand::rng().random_range(Duration::ZERO..=half)
    }

    /// Waits [`Backoff::next_delay`] on the tokio clock.
    pub async fn sleep(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }

    /// Call after a success: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    /// Virtual time spent by `n` sleeps.
    async fn slept(backoff: &mut Backoff, n: usize) -> Duration {
        let start = Instant::now();
        for _ in 0..n {
            backoff.sleep().await;
        }
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn waits_double_up_to_the_cap_and_start_over_after_reset() {
        let (base, max) = (Duration::from_millis(100), Duration::from_secs(2));
        let mut backoff = Backoff::new(base, max);

        // Steps 100, 200, 400, 800 ms: each wait is within [step/2, step].
        let mut step = base;
        for _ in 0..4 {
            let waited = slept(&mut backoff, 1).await;
            assert!(
                waited >= step / 2 && waited <= step,
                "{waited:?} for a {step:?} step"
            );
            step *= 2;
        }
        // Then capped: ten more waits take between 10 × 1 s and 10 × 2 s.
        let capped = slept(&mut backoff, 10).await;
        assert!(capped >= max / 2 * 10 && capped <= max * 10, "{capped:?}");

        backoff.reset();
        let first = slept(&mut backoff, 1).await;
        assert!(first >= base / 2 && first <= base, "{first:?} after reset");
    }

    #[tokio::test(start_paused = true)]
    async fn clients_failing_together_spread_out() {
        let mut waits = Vec::new();
        for _ in 0..50 {
            let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(1));
            waits.push(slept(&mut backoff, 1).await);
        }
        waits.sort();
        waits.dedup();
        assert!(
            waits.len() > 40,
            "only {} distinct waits of 50",
            waits.len()
        );
    }
}
