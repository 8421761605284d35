//! How runs are admitted: at most `max_running` at once, a newcomer
//! waiting for a slot at most the queue wait (then the node says it is
//! busy, and SMS tries another); none once the node drains. A run counts
//! as in progress from its admission until its guard drops, so a drain
//! that starts meanwhile waits for it.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::stats::{RunStats, RunningGuard};
use super::InvokeError;
use spear_proto::defaults::RUN_QUEUE_WAIT as QUEUE_WAIT;

pub struct Admission {
    slots: Arc<Semaphore>,
    max_running: usize,
    stats: Arc<RunStats>,
}

/// An admitted run: its slot, and its place in the runs in progress.
pub struct Admitted<'a> {
    _slot: OwnedSemaphorePermit,
    _running: RunningGuard<'a>,
}

impl Admission {
    pub fn new(max_running: usize) -> Admission {
        Admission {
            slots: Arc::new(Semaphore::new(max_running)),
            max_running,
            stats: Arc::default(),
        }
    }

    /// Run counters, for heartbeats, status and metrics.
    pub fn stats(&self) -> &Arc<RunStats> {
        &self.stats
    }

    /// Refuses a run at once while the node drains.
    pub fn open(&self) -> Result<(), InvokeError> {
        if self.stats.is_draining() {
            return Err(InvokeError::Draining);
        }
        Ok(())
    }

    /// Waits for a slot; see the module docs.
    pub async fn enter(&self) -> Result<Admitted<'_>, InvokeError> {
        let busy = || InvokeError::Busy(self.max_running);
        let slot = tokio::time::timeout(QUEUE_WAIT, Arc::clone(&self.slots).acquire_owned())
            .await
            .map_err(|_| busy())?
            .map_err(|_| busy())?;
        let running = self.stats.start();
        // Checked once counted, so a drain that starts now waits for it.
        self.open()?;
        Ok(Admitted {
            _slot: slot,
            _running: running,
        })
    }
}
