//! What the sync loop reports about itself (status endpoint, metrics,
//! heartbeats), and what makes the node ready for work ([`Readiness`]).

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use spear_proto::v1::SyncState;

/// The sync loop's current situation.
#[derive(Debug, Clone)]
pub struct SyncStatus {
    pub state: SyncState,
    /// The last connection or stream error, for operators.
    pub last_error: Option<String>,
    /// SMS's revision from its last progress message.
    pub sms_revision: u64,
    /// When `state` last changed.
    pub since: Instant,
}

impl Default for SyncStatus {
    fn default() -> Self {
        Self {
            state: SyncState::Connecting,
            last_error: None,
            sms_revision: 0,
            since: Instant::now(),
        }
    }
}

/// Whether the node should be given work (`GET /readyz`): it holds a
/// registry, and it has not been cut off from SMS for longer than the
/// stale bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// No registry applied yet: neither a snapshot from SMS nor one kept
    /// in the state dir.
    NoRegistry,
    /// Serving the last good registry, away from SMS for `away`, past `bound`.
    Stale {
        away: Duration,
        bound: Duration,
    },
    /// Shutting down: finishing its runs, taking no more.
    Draining,
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Readiness::Ready => f.write_str("ready"),
            Readiness::NoRegistry => f.write_str("not ready: no registry applied yet (waiting for SMS's first snapshot)"),
            Readiness::Stale { away, bound } => write!(
                f,
                "not ready: SMS has been unreachable for {}s, past the {}s stale bound (--stale-after-secs); serving the last good registry",
                away.as_secs(),
                bound.as_secs()
            ),
            Readiness::Draining => f.write_str("not ready: shutting down; finishing the runs in progress, taking no more"),
        }
    }
}

impl SyncStatus {
    /// Moves to `state`, noting when it changed.
    pub fn set_state(&mut self, state: SyncState) {
        if self.state != state {
            self.state = state;
            self.since = Instant::now();
        }
    }

    /// Readiness of a node whose registry is at `epoch` (0: none), with
    /// `bound` the longest it may be away from SMS, at `now`.
    pub fn readiness(&self, epoch: u64, bound: Duration, now: Instant) -> Readiness {
        if epoch == 0 {
            return Readiness::NoRegistry;
        }
        let away = now.saturating_duration_since(self.since);
        match self.state {
            SyncState::Synced => Readiness::Ready,
            _ if away <= bound => Readiness::Ready,
            _ => Readiness::Stale { away, bound },
        }
    }
}

/// Shared between the sync loop and its readers.
#[derive(Debug, Default)]
pub struct SyncStatusCell {
    pub status: Mutex<SyncStatus>,
    pub counters: SyncCounters,
}

#[derive(Debug, Default)]
pub struct SyncCounters {
    pub reconnects: AtomicU64,
    pub snapshots: AtomicU64,
    pub deltas: AtomicU64,
    pub gaps: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_with_a_registry_until_away_past_the_bound() {
        let bound = Duration::from_secs(30);
        let mut status = SyncStatus::default();
        let start = status.since;
        assert_eq!(status.readiness(0, bound, start), Readiness::NoRegistry);
        // A registry kept in the state dir serves while SMS is reached.
        assert_eq!(status.readiness(3, bound, start), Readiness::Ready);
        status.set_state(SyncState::Synced);
        let later = status.since + Duration::from_secs(3600);
        assert_eq!(status.readiness(3, bound, later), Readiness::Ready);
        status.set_state(SyncState::Stale);
        let lost = status.since;
        assert_eq!(status.readiness(3, bound, lost + bound), Readiness::Ready);
        let past = status.readiness(3, bound, lost + bound + Duration::from_secs(1));
        assert!(matches!(past, Readiness::Stale { .. }), "{past}");
        assert!(
            past.to_string().contains("31s, past the 30s stale bound"),
            "{past}"
        );
        // Staying stale does not restart the clock.
        status.set_state(SyncState::Stale);
        assert_eq!(status.since, lost);
    }
}
