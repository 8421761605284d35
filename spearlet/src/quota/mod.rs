//! Fleet quotas, the node's side (docs/quotas.md). Entry point:
//! [`NodeQuotas`], built once per node and shared by every run.
//!
//! The node holds a *slice* of each quota it meets: units SMS granted it in
//! the quota's current window. A call spends one unit of its slice without
//! a round trip; only an empty slice asks SMS for another. Each slice is a
//! small state machine:
//!
//! ```text
//!   Empty ──take: SMS grants n > 0──▶ Holding(n) ──spend──▶ Holding(n-1) … ──▶ Empty
//!     │                                   │ the window ends
//!     │ SMS grants 0                      ▼
//!     ▼                                 Empty (unspent units of an old window are void)
//!   Spent(until the window ends): refused with no round trip
//!     │ SMS holds no such quota
//!     ▼
//!   Unlimited(for a few seconds): nothing counted
//! ```
//!
//! Tokens and cost are known only after a model request: a request needs
//! one unit left, and what it used is spent afterwards, past the slice if
//! need be ([`NodeQuotas::spend`] tells SMS what the slice did not cover).
//!
//! When SMS cannot be reached, the quota's `on_unreachable` decides:
//! refuse (the default) or let the call through uncounted.

mod applies;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_proto::quota::{describe, OnUnreachable, Spent};
use spear_proto::v1::{QuotaKey, TakeQuotaRequest, TakeQuotaResponse};
use tracing::warn;

pub use applies::{call_keys, model_keys, CallQuota};

use crate::sms_link::SmsLink;

/// How long one take may wait for SMS.
const TAKE_WITHIN: Duration = Duration::from_secs(3);

/// Why a quota'd call or request is not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaRefused {
    #[error("{0}")]
    Spent(Box<Spent>),
    #[error("{whose}'s quota ({setting}) could not be counted: {why}; its on_unreachable is \"refuse\" (\"allow\" lets calls through uncounted while SMS is unreachable)")]
    Unreachable {
        whose: String,
        setting: &'static str,
        why: String,
    },
}

/// Why SMS gave no slice.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct TakeFailed(pub String);

/// Where slices come from: SMS, over the node's link.
#[async_trait]
pub trait Taker: Send + Sync + 'static {
    async fn take(&self, request: TakeQuotaRequest) -> Result<TakeQuotaResponse, TakeFailed>;
}

#[async_trait]
impl Taker for SmsLink {
    async fn take(&self, request: TakeQuotaRequest) -> Result<TakeQuotaResponse, TakeFailed> {
        let mut client = self
            .quotas()
            .map_err(|e| TakeFailed(format!("SMS is unreachable ({e})")))?;
        match tokio::time::timeout(TAKE_WITHIN, client.take_quota(request)).await {
            Ok(Ok(answer)) => Ok(answer.into_inner()),
            Ok(Err(status)) => Err(TakeFailed(format!(
                "SMS answered {:?}: {}",
                status.code(),
                status.message()
            ))),
            Err(_) => Err(TakeFailed(format!(
                "SMS did not answer within {TAKE_WITHIN:?}"
            ))),
        }
    }
}

/// One quota's slice on this node; see the module docs.
#[derive(Debug, Default)]
struct Slice {
    /// Units left to spend until `until_ms`.
    left: u64,
    /// When the state below ends (the window's end, mostly).
    until_ms: u64,
    spent: Option<Spent>,
    unlimited: bool,
    /// Units used past the slice that SMS has not heard of yet.
    owed: u64,
}

impl Slice {
    fn current(&mut self, now: u64) {
        if now >= self.until_ms {
            self.left = 0;
            self.spent = None;
            self.unlimited = false;
        }
    }

    fn took(&mut self, key: &QuotaKey, answer: &TakeQuotaResponse, now: u64) {
        self.until_ms = answer.refill_at_ms;
        self.unlimited = answer.unlimited;
        self.left = answer.granted;
        // Nothing granted is a spent window, whatever else the answer
        // lacks: an empty slice is never spent from.
        self.spent = (answer.granted == 0 && !answer.unlimited).then(|| {
            let rate = answer.rate.unwrap_or_default();
            Spent::new(key, &rate, answer.refill_at_ms, now)
        });
    }
}

/// Counters for the node's metrics.
#[derive(Debug, Default)]
pub struct QuotaStats {
    /// Takes that reached SMS.
    pub takes: AtomicU64,
    pub refused_spent: AtomicU64,
    pub refused_unreachable: AtomicU64,
    /// Calls let through uncounted (`on_unreachable: allow`).
    pub allowed_uncounted: AtomicU64,
}

/// The node's slices of every quota it met; cloned into every run.
#[derive(Clone)]
pub struct NodeQuotas {
    node_id: String,
    taker: Arc<dyn Taker>,
    slices: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slice>>>>>,
    pub stats: Arc<QuotaStats>,
}

/// Slices kept before those of ended windows are dropped.
const MAX_SLICES: usize = 100_000;

fn slice_id(key: &QuotaKey) -> String {
    format!("{}/{}/{}/{}", key.meter, key.id, key.tool, key.principal)
}

impl NodeQuotas {
    pub fn new(node_id: &str, taker: Arc<dyn Taker>) -> Self {
        Self {
            node_id: node_id.to_string(),
            taker,
            slices: Arc::default(),
            stats: Arc::default(),
        }
    }

    fn slice(&self, key: &QuotaKey) -> Arc<tokio::sync::Mutex<Slice>> {
        let mut slices = self.slices.lock();
        if slices.len() >= MAX_SLICES {
            let now = spear_common::clock::now_ms();
            slices.retain(|_, s| s.try_lock().map_or(true, |s| s.until_ms > now));
        }
        Arc::clone(slices.entry(slice_id(key)).or_default())
    }

    /// Asks SMS for a slice of `key` after counting `spent`.
    async fn ask(&self, key: &QuotaKey, spent: u64) -> Result<TakeQuotaResponse, TakeFailed> {
        self.stats.takes.fetch_add(1, Ordering::Relaxed);
        self.taker
            .take(TakeQuotaRequest {
                node_id: self.node_id.clone(),
                key: Some(key.clone()),
                spent,
                want: 0,
            })
            .await
    }

    fn unreachable(
        &self,
        key: &QuotaKey,
        on_unreachable: OnUnreachable,
        failed: TakeFailed,
    ) -> Result<(), QuotaRefused> {
        let (whose, setting) = describe(key);
        match on_unreachable {
            OnUnreachable::Allow => {
                let uncounted = self.stats.allowed_uncounted.fetch_add(1, Ordering::Relaxed) + 1;
                // The 1st, 2nd, 4th, 8th… such call: an outage does not
                // flood the log.
                if uncounted.is_power_of_two() {
                    warn!(quota = %whose, setting, why = %failed, uncounted, "a quota could not be counted; its on_unreachable is \"allow\", so calls go through uncounted");
                }
                Ok(())
            }
            OnUnreachable::Refuse => {
                self.stats
                    .refused_unreachable
                    .fetch_add(1, Ordering::Relaxed);
                Err(QuotaRefused::Unreachable {
                    whose,
                    setting,
                    why: failed.0,
                })
            }
        }
    }

    /// One unit of `key` for a call about to be made (`consume`), or only
    /// the assurance that one is left (a model request, whose tokens are
    /// [`spend`](Self::spend)t afterwards).
    pub async fn take(
        &self,
        key: &QuotaKey,
        on_unreachable: OnUnreachable,
        consume: bool,
    ) -> Result<(), QuotaRefused> {
        let slice = self.slice(key);
        let mut slice = slice.lock().await;
        let now = spear_common::clock::now_ms();
        slice.current(now);
        if slice.unlimited {
            return Ok(());
        }
        if slice.left == 0 && slice.spent.is_none() {
            let owed = std::mem::take(&mut slice.owed);
            match self.ask(key, owed).await {
                Ok(answer) => slice.took(key, &answer, now),
                Err(failed) => {
                    slice.owed = owed;
                    return self.unreachable(key, on_unreachable, failed);
                }
            }
            if slice.unlimited {
                return Ok(());
            }
        }
        if let Some(spent) = &slice.spent {
            self.stats.refused_spent.fetch_add(1, Ordering::Relaxed);
            return Err(QuotaRefused::Spent(Box::new(spent.clone())));
        }
        if consume {
            slice.left -= 1;
        }
        Ok(())
    }

    /// Counts `units` of `key` used (a model request's tokens or cost):
    /// from the slice, and what it does not cover, at SMS.
    pub async fn spend(&self, key: &QuotaKey, units: u64) {
        if units == 0 {
            return;
        }
        let slice = self.slice(key);
        let mut slice = slice.lock().await;
        let now = spear_common::clock::now_ms();
        slice.current(now);
        if slice.unlimited {
            return;
        }
        if slice.left >= units {
            slice.left -= units;
            return;
        }
        let owed = slice.owed.saturating_add(units - slice.left);
        slice.left = 0;
        match self.ask(key, owed).await {
            Ok(answer) => {
                slice.owed = 0;
                slice.took(key, &answer, now);
            }
            // Told with the next take.
            Err(_) => slice.owed = owed,
        }
    }
}

#[cfg(test)]
mod tests;
