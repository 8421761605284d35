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
//! A slice lasts a few seconds (SMS says until when, `slice_until_ms`);
//! every take tells SMS how much of the last slice was used, so the rest
//! goes back to the fleet. A per-principal key's take carries the run's
//! delegation, which proves to SMS that it sent this node a run for that
//! principal.
//!
//! When SMS cannot be reached, the quota's `on_unreachable` decides:
//! refuse (the default) or let the call through uncounted.

mod applies;
mod settle;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
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
    #[error("SMS refused this node a slice of {whose}'s quota ({setting}): {why}")]
    Refused {
        whose: String,
        setting: &'static str,
        why: String,
    },
}

/// Why SMS gave no slice.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TakeFailed {
    /// SMS could not be asked, or could not count: `on_unreachable` decides.
    #[error("{0}")]
    Unreachable(String),
    /// SMS answered and refused this node's take (its sentence): the call
    /// is refused whatever `on_unreachable` says.
    #[error("{0}")]
    Refused(String),
}

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
            .map_err(|e| TakeFailed::Unreachable(format!("SMS is unreachable ({e})")))?;
        match tokio::time::timeout(TAKE_WITHIN, client.take_quota(request)).await {
            Ok(Ok(answer)) => Ok(answer.into_inner()),
            Ok(Err(status)) if status.code() == tonic::Code::ResourceExhausted => {
                Err(TakeFailed::Refused(status.message().to_string()))
            }
            Ok(Err(status)) => Err(TakeFailed::Unreachable(format!(
                "SMS answered {:?}: {}",
                status.code(),
                status.message()
            ))),
            Err(_) => Err(TakeFailed::Unreachable(format!(
                "SMS did not answer within {TAKE_WITHIN:?}"
            ))),
        }
    }
}

/// One quota's slice on this node; see the module docs.
#[derive(Debug, Default)]
struct Slice {
    /// Units left to spend until `slice_until_ms`.
    left: u64,
    /// Units of the last slice SMS granted, and of those spent: told to
    /// SMS with the next take (or a settle, `settle.rs`).
    granted: u64,
    used: u64,
    /// When `left` goes back to SMS (unspent).
    slice_until_ms: u64,
    /// When the state below ends (the window's end, mostly).
    until_ms: u64,
    spent: Option<Spent>,
    unlimited: bool,
    /// Units used past the slice that SMS has not heard of yet.
    owed: u64,
    /// The delegation of the run that last asked (per-principal keys).
    delegation: Bytes,
    /// Whose slice this is (for settling it).
    key: Option<QuotaKey>,
}

impl Slice {
    fn current(&mut self, now: u64) {
        if now >= self.until_ms {
            self.left = 0;
            self.granted = 0;
            self.used = 0;
            self.spent = None;
            self.unlimited = false;
        }
        if now >= self.slice_until_ms {
            // Unspent units are SMS's again; `used` says so at the next take.
            self.left = 0;
        }
    }

    /// Spends up to `units` of the slice; returns what it did not cover.
    fn spend(&mut self, units: u64) -> u64 {
        let from_slice = units.min(self.left);
        self.left -= from_slice;
        self.used += from_slice;
        units - from_slice
    }

    fn took(&mut self, key: &QuotaKey, answer: &TakeQuotaResponse, now: u64) {
        self.until_ms = answer.refill_at_ms;
        // An SMS that sets no end lets the slice last the window.
        self.slice_until_ms = match answer.slice_until_ms {
            0 => answer.refill_at_ms,
            until => until.min(answer.refill_at_ms),
        };
        self.unlimited = answer.unlimited;
        self.left = answer.granted;
        self.granted = answer.granted;
        self.used = 0;
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
    /// Takes SMS refused (this node's ask was out of bounds).
    pub refused_by_sms: AtomicU64,
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
        Arc::clone(slices.entry(slice_id(key)).or_insert_with(|| {
            Arc::new(tokio::sync::Mutex::new(Slice {
                key: Some(key.clone()),
                ..Slice::default()
            }))
        }))
    }

    /// Asks SMS for a slice of `key` after counting `spent` and what
    /// the last slice `used`.
    async fn ask(
        &self,
        key: &QuotaKey,
        (used, spent): (u64, u64),
        delegation: &Bytes,
        settle: bool,
    ) -> Result<TakeQuotaResponse, TakeFailed> {
        self.stats.takes.fetch_add(1, Ordering::Relaxed);
        self.taker
            .take(TakeQuotaRequest {
                node_id: self.node_id.clone(),
                key: Some(key.clone()),
                spent,
                want: 0,
                used,
                settle,
                delegation: if key.principal.is_empty() {
                    Bytes::new()
                } else {
                    delegation.clone()
                },
            })
            .await
    }

    /// A take that got no answer: refused when SMS refused it, else as
    /// the quota's `on_unreachable` says.
    fn not_taken(
        &self,
        key: &QuotaKey,
        on_unreachable: OnUnreachable,
        failed: TakeFailed,
    ) -> Result<(), QuotaRefused> {
        let (whose, setting) = describe(key);
        let failed = match failed {
            TakeFailed::Refused(why) => {
                self.stats.refused_by_sms.fetch_add(1, Ordering::Relaxed);
                return Err(QuotaRefused::Refused {
                    whose,
                    setting,
                    why,
                });
            }
            TakeFailed::Unreachable(why) => why,
        };
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
                    why: failed,
                })
            }
        }
    }

    /// One unit of `key` for a call about to be made (`consume`), or only
    /// the assurance that one is left (a model request, whose tokens are
    /// [`spend`](Self::spend)t afterwards). `delegation` is the run's,
    /// shown to SMS for a per-principal key.
    pub async fn take(
        &self,
        key: &QuotaKey,
        on_unreachable: OnUnreachable,
        consume: bool,
        delegation: &Bytes,
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
            slice.delegation = delegation.clone();
            match self.ask(key, (slice.used, owed), delegation, false).await {
                Ok(answer) => slice.took(key, &answer, now),
                Err(failed) => {
                    slice.owed = owed;
                    return self.not_taken(key, on_unreachable, failed);
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
            slice.spend(1);
        }
        Ok(())
    }

    /// Counts `units` of `key` used (a model request's tokens or cost):
    /// from the slice, and what it does not cover, at SMS.
    pub async fn spend(&self, key: &QuotaKey, units: u64, delegation: &Bytes) {
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
        let past_slice = slice.spend(units);
        if past_slice == 0 {
            return;
        }
        let owed = slice.owed.saturating_add(past_slice);
        slice.delegation = delegation.clone();
        match self.ask(key, (slice.used, owed), delegation, false).await {
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
