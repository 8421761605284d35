//! Keeping the node's registry in sync with SMS.

mod apply;
mod client;
mod status;

pub use apply::{Applier, Step, Update};
pub use client::{reconnect_backoff, SyncConfig, Syncer, SILENCE_TIMEOUT};
pub use status::{Readiness, SyncCounters, SyncStatus, SyncStatusCell};
