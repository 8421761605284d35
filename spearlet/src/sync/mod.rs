//! Keeping the node's registry in sync with SMS.

mod apply;
mod client;
mod retry;
mod status;
pub mod tickets;

pub use apply::{Applier, Step, Update};
pub use client::{SyncConfig, Syncer, SILENCE_TIMEOUT};
pub use retry::Retry;
pub use status::{Readiness, SyncCounters, SyncStatus, SyncStatusCell};
