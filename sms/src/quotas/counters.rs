//! The counters of fleet quotas: one per quota key, holding the window it
//! counts and the units used in it. [`Counters::take`] is the only write:
//! it adds what was spent and grants what fits, atomically, so replicas
//! sharing the counters (on etcd) never grant one unit twice.

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::Mutex;

/// Why the counters cannot be reached.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CounterError {
    #[error("the quota counters are unavailable: {0}")]
    Unavailable(String),
    #[error("the quota counter at {key} is corrupt; delete that key and the window starts afresh")]
    Corrupt { key: String },
    #[error("the quota counter {key} is contended by too many writers; the node asks again")]
    Contended { key: String },
}

/// One take's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// Units granted beyond the spent ones.
    pub granted: u64,
    /// Units used in the window after this take (may pass `max` by what
    /// was spent already).
    pub used: u64,
}

/// How many units a take wants beyond what was spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Units(u64),
    /// As many as [`slice()`] gives for the window as it is.
    Slice,
}

/// The largest slice of one take.
const MAX_SLICE: u64 = 1_000;

/// The slice a take grants when the node leaves it to SMS: a twentieth of
/// the limit, and an eighth of what is left, so it shrinks to one unit
/// as the window fills (at most `MAX_SLICE` calls, or a twentieth of a
/// larger limit: token and cost limits are large numbers).
pub fn slice(max: u64, used: u64) -> u64 {
    let left = max.saturating_sub(used);
    (left / 8).min(max / 20).clamp(1, MAX_SLICE.max(max / 20))
}

/// One take of a window's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The window's end (Unix ms): a counter of an older window starts at 0.
    pub window_end: u64,
    /// The quota's limit.
    pub max: u64,
    /// Units used past what was granted (tokens, cost), counted whatever
    /// is left.
    pub spent: u64,
    /// Units of a slice granted earlier in this window that its node did
    /// not use: uncounted again.
    pub returned: u64,
    pub want: Want,
}

impl Take {
    /// A take of `want` with nothing spent or returned.
    pub fn of(window_end: u64, max: u64, want: Want) -> Take {
        Take {
            window_end,
            max,
            spent: 0,
            returned: 0,
            want,
        }
    }
}

/// The window's counter after returning `returned`, adding `spent` and
/// granting up to `want` of what is left below `max`: the one rule both
/// stores apply.
pub fn apply(used: u64, take: &Take) -> Taken {
    let used = used
        .saturating_sub(take.returned)
        .saturating_add(take.spent);
    let want = match take.want {
        Want::Units(units) => units,
        Want::Slice => slice(take.max, used),
    };
    let granted = want.min(take.max.saturating_sub(used));
    Taken {
        granted,
        used: used + granted,
    }
}

/// Where quota counters live.
#[async_trait]
pub trait Counters: Send + Sync + 'static {
    /// In the window `take.window_end` of counter `key`: uncounts what
    /// was returned, counts what was spent, then grants up to `want` while
    /// the window's total stays at most `max`.
    async fn take(&self, key: &str, take: &Take) -> Result<Taken, CounterError>;
}

/// Counters in this SMS's memory (one SMS, no etcd): lost on restart.
#[derive(Default)]
pub struct MemoryCounters {
    windows: Mutex<HashMap<String, (u64, u64)>>,
}

/// Counters kept in memory before windows that ended are dropped.
const MAX_MEMORY_COUNTERS: usize = 100_000;

#[async_trait]
impl Counters for MemoryCounters {
    async fn take(&self, key: &str, take: &Take) -> Result<Taken, CounterError> {
        let window_end = take.window_end;
        let mut windows = self.windows.lock();
        if windows.len() >= MAX_MEMORY_COUNTERS && !windows.contains_key(key) {
            windows.retain(|_, (end, _)| *end >= window_end);
        }
        let counter = windows.entry(key.to_string()).or_insert((window_end, 0));
        if counter.0 != window_end {
            *counter = (window_end, 0);
        }
        let taken = apply(counter.1, take);
        counter.1 = taken.used;
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_take_grants_what_fits_and_counts_what_was_spent() {
        let units = Want::Units;
        let take = |max, spent, want| Take {
            spent,
            ..Take::of(60_000, max, want)
        };
        assert_eq!(
            apply(0, &take(3, 0, units(5))),
            Taken {
                granted: 3,
                used: 3
            }
        );
        assert_eq!(
            apply(3, &take(3, 0, units(1))),
            Taken {
                granted: 0,
                used: 3
            }
        );
        // Tokens a request used are counted even past the limit.
        assert_eq!(
            apply(90, &take(100, 25, units(10))),
            Taken {
                granted: 0,
                used: 115
            }
        );
        assert_eq!(
            apply(u64::MAX, &take(3, 5, units(1))).granted,
            0,
            "no overflow"
        );
    }

    #[test]
    fn returned_units_are_granted_again() {
        let back = Take {
            returned: 4,
            ..Take::of(60_000, 10, Want::Units(6))
        };
        assert_eq!(
            apply(10, &back),
            Taken {
                granted: 4,
                used: 10
            }
        );
        let more_than_held = Take {
            returned: 50,
            ..Take::of(60_000, 10, Want::Units(1))
        };
        assert_eq!(apply(3, &more_than_held).used, 1, "never below zero");
    }

    #[test]
    fn slices_shrink_to_one_unit_as_the_window_fills() {
        assert_eq!(slice(3, 0), 1, "a small quota is taken one call at a time");
        assert_eq!(slice(100, 0), 5);
        assert_eq!(slice(100, 80), 2);
        assert_eq!(slice(100, 95), 1);
        assert_eq!(slice(100, 100), 1, "asking is cheap; the counters grant 0");
        assert_eq!(slice(200_000, 0), 10_000, "a twentieth of a token quota");
        assert_eq!(slice(1_000_000, 999_990), 1);
        let mut used = 0;
        let mut takes = 0;
        while used < 100 {
            used += apply(used, &Take::of(60_000, 100, Want::Slice)).granted;
            takes += 1;
        }
        assert_eq!(used, 100);
        assert!(takes < 40, "{takes} takes for 100 calls");
    }

    #[tokio::test]
    async fn a_new_window_starts_at_zero() {
        let counters = MemoryCounters::default();
        let units = Want::Units;
        let take = |end, want| Take::of(end, 3, want);
        let first = counters.take("k", &take(60_000, units(3))).await.unwrap();
        assert_eq!(first.granted, 3);
        let spent = counters.take("k", &take(60_000, units(1))).await.unwrap();
        assert_eq!(spent.granted, 0);
        let next = counters.take("k", &take(120_000, units(2))).await.unwrap();
        assert_eq!(
            next,
            Taken {
                granted: 2,
                used: 2
            }
        );
        let other = counters
            .take("other", &take(60_000, units(1)))
            .await
            .unwrap();
        assert_eq!(other.granted, 1);
    }
}
