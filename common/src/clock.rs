//! Wall-clock time as the Unix milliseconds records and messages carry.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix milliseconds of `t` (0 before the epoch).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}
