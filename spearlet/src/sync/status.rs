//! What the sync loop reports about itself (status endpoint, metrics, heartbeats).

use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;
use spear_proto::v1::SyncState;

/// The sync loop's current situation.
#[derive(Debug, Clone)]
pub struct SyncStatus {
    pub state: SyncState,
    /// The SMS address of the current (or last) stream.
    pub sms: Option<String>,
    /// The last connection or stream error, for operators.
    pub last_error: Option<String>,
    /// SMS's revision from its last progress message.
    pub sms_revision: u64,
}

impl Default for SyncStatus {
    fn default() -> Self {
        Self {
            state: SyncState::Connecting,
            sms: None,
            last_error: None,
            sms_revision: 0,
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
