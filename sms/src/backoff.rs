//! Jittered exponential backoff, shared by every retry loop in SMS.

use std::time::Duration;

use rand::Rng;

/// Delays that double from `base` up to `max`, each drawn uniformly from the
/// upper half of the current step, so many clients retrying at once spread out.
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

    /// Call after a success: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_then_cap_and_reset() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        for _ in 0..20 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_secs(1), "{late:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
