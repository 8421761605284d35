//! Giving back what a slice did not spend. A slice lasts a few seconds
//! (SMS's `slice_until_ms`); a node that stops calling (its runs ended)
//! would otherwise hold its last slice's units, counted at SMS, until it
//! next asked or the window ended. Every few seconds the node tells SMS
//! how much of each ended slice it used (`settle`), and the rest is the
//! fleet's again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::debug;

use super::NodeQuotas;

/// How often ended slices are settled.
pub const SETTLE_EVERY: Duration = Duration::from_secs(5);

impl NodeQuotas {
    /// Settles every slice that ended with units unspent; returns how many.
    pub async fn settle_ended(&self) -> usize {
        let now = spear_common::clock::now_ms();
        let due: Vec<_> = self
            .slices
            .lock()
            .values()
            .filter(|slice| {
                slice.try_lock().is_ok_and(|s| {
                    !s.unlimited
                        && s.used < s.granted
                        && now >= s.slice_until_ms
                        && now < s.until_ms
                })
            })
            .map(Arc::clone)
            .collect();
        let mut settled = 0;
        for slice in due {
            let mut slice = slice.lock().await;
            let Some(key) = slice.key.clone() else {
                continue;
            };
            slice.current(now);
            if slice.used >= slice.granted {
                continue;
            }
            let delegation = slice.delegation.clone();
            match self.ask(&key, (slice.used, 0), &delegation, true).await {
                Ok(_) => {
                    slice.granted = 0;
                    slice.used = 0;
                    settled += 1;
                }
                // Said with the next take instead.
                Err(why) => debug!(quota = %key.id, %why, "an ended slice could not be settled"),
            }
        }
        settled
    }

    /// Settles ended slices every `SETTLE_EVERY` (5 s) until `shutdown`.
    pub async fn settle_until(self, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(SETTLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.settle_ended().await;
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}
