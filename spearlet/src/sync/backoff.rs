//! Jittered exponential backoff for reconnecting to SMS.

use std::time::Duration;

use rand::Rng;

/// Delays doubling from `base` to `max`, each drawn from the upper half of
/// the step so a thousand nodes reconnecting at once spread out.
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

    pub fn next_delay(&mut self) -> Duration {
        let step = self
            .base
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        step / 2 + rand::rng().random_range(Duration::ZERO..=step / 2)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        assert!(b.next_delay() <= Duration::from_millis(100));
        let later: Vec<Duration> = (0..20).map(|_| b.next_delay()).collect();
        assert!(later.iter().all(|d| *d <= Duration::from_secs(5)));
        assert!(*later.last().unwrap() >= Duration::from_millis(2500));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
