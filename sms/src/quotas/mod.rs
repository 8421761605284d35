//! Fleet quotas, SMS's side (docs/quotas.md). Entry point: [`QuotaBook`].
//!
//! A node asks for a slice of a quota ([`QuotaBook::take`]) and spends it
//! locally; SMS finds the quota's limit itself (in the task's config, or
//! the server's file in the registry), never from the node, and grants
//! only what the window has left, so the fleet together never passes the
//! limit while SMS is reachable. Slices shrink as the window fills: near
//! the limit every node takes one unit at a time, so units a node holds
//! unspent when the window runs out are few (at most one slice per node).
//!
//! A node is trusted with its own calls, not with the fleet's window:
//! each take settles the node's last slice (`holdings.rs`: what it did not
//! use goes back), what it says it spent is bounded by what it was
//! granted, and it counts only the principals SMS sent it runs for
//! (`principals.rs`). Each refusal is one sentence ([`Refusal`]) and a
//! count on `/metrics`.
//!
//! ```text
//!   node ──TakeQuota(key, used, spent, want)──▶ QuotaBook ──limit──▶ task config / server file
//!                                                  │ settle the node's last slice (Holdings)
//!                                                  └──take(window)──▶ Counters (memory | etcd)
//! ```

mod counters;
mod etcd;
mod holdings;
mod principals;
pub mod refusals;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use spear_proto::quota::{refill_at, TaskQuota};
use spear_proto::v1::{QuotaKey, QuotaMeter, Rate, TakeQuotaRequest, TakeQuotaResponse};
use tracing::warn;

pub use counters::{slice, CounterError, Counters, MemoryCounters, Take, Taken, Want};
pub use etcd::EtcdCounters;
pub use holdings::Holdings;
pub use refusals::{Reason, Refusal};

use crate::oauth::per_principal::DelegationError;
use crate::oauth::{PerPrincipal, PerPrincipalError};
use crate::tasks::{TaskError, TaskStore};
use crate::watch::Hub;

/// How long a task's quota is read from SMS's memory before the task
/// store is asked again: a changed quota holds within this.
const TASK_QUOTA_FRESH: Duration = Duration::from_secs(2);
/// How long a node counts nothing for a quota SMS does not hold.
const UNLIMITED_FOR_MS: u64 = 5_000;
/// How long a node may spend a slice before it goes back with its next
/// take: units a node took and left unspent return within this.
const SLICE_FOR_MS: u64 = 10_000;
/// The longest principal a node may name: its text reaches sentences and
/// logs.
const MAX_PRINCIPAL_BYTES: usize = 1_024;

/// Why a take is refused.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error("the quota key names no meter; a node sends task or server meters")]
    NoMeter,
    #[error("the quota key names no task or server")]
    NoId,
    #[error(transparent)]
    Counters(#[from] CounterError),
    #[error("reading task '{task}' for its quota: {error}")]
    Task { task: String, error: TaskError },
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// Every quota counter SMS keeps, and where each quota's limit is read.
pub struct QuotaBook {
    counters: Arc<dyn Counters>,
    tasks: Arc<dyn TaskStore>,
    hub: Arc<Hub>,
    task_quotas: Mutex<HashMap<String, (Instant, Option<TaskQuota>)>>,
    holdings: Holdings,
    principals: principals::Principals,
    /// Opens runs' delegations; `None` when SMS seals none.
    delegations: Option<Arc<PerPrincipal>>,
}

impl QuotaBook {
    pub fn new(counters: Arc<dyn Counters>, tasks: Arc<dyn TaskStore>, hub: Arc<Hub>) -> Self {
        Self {
            counters,
            tasks,
            hub,
            task_quotas: Mutex::default(),
            holdings: Holdings::default(),
            principals: principals::Principals::default(),
            delegations: None,
        }
    }

    /// Opens runs' delegations with `per_principal`: the principals SMS
    /// sent a node runs for.
    pub fn with_delegations(mut self, per_principal: Option<Arc<PerPrincipal>>) -> Self {
        self.delegations = per_principal;
        self
    }

    /// A slice of `take.key`'s quota for `node` (the caller, as the gate
    /// knows it) after settling its last one; see the module docs.
    pub async fn take(
        &self,
        node: &str,
        take: &TakeQuotaRequest,
    ) -> Result<TakeQuotaResponse, QuotaError> {
        let key = take.key.clone().unwrap_or_default();
        if key.id.is_empty() {
            return Err(QuotaError::NoId);
        }
        let now = spear_common::clock::now_ms();
        let Some((rate, per_principal)) = self.rate(&key).await? else {
            return Ok(TakeQuotaResponse {
                unlimited: true,
                refill_at_ms: now + UNLIMITED_FOR_MS,
                ..TakeQuotaResponse::default()
            });
        };
        let window_end = refill_at(now, rate.per_ms);
        let counter = counter_key(&key, per_principal);
        if per_principal && !key.principal.is_empty() {
            self.principal_counted(node, (&key, &counter), window_end, &take.delegation)?;
        }
        let begun = self
            .holdings
            .begin(node, &counter, window_end, take.used)
            .map_err(|_| Refusal::StillAsking {
                node: node.to_string(),
                quota: describe_key(&key),
            })?;
        let full_slice = slice(rate.max, 0);
        let counted = Take {
            spent: self.spent(node, &key, take.spent, begun.settled.spent_bound(rate.max)),
            returned: begun.settled.returned,
            // A node asks for no more than a full slice at a time.
            ..Take::of(
                window_end,
                rate.max,
                match take.want {
                    0 => Want::Slice,
                    units => Want::Units(units.min(full_slice)),
                },
            )
        };
        let counted = if take.settle {
            Take {
                want: Want::Units(0),
                ..counted
            }
        } else {
            counted
        };
        let taken = self.counters.take(&counter, &counted).await?;
        begun.granted(taken.granted);
        Ok(TakeQuotaResponse {
            granted: taken.granted,
            rate: Some(rate),
            used: taken.used,
            refill_at_ms: window_end,
            unlimited: false,
            slice_until_ms: window_end.min(now + SLICE_FOR_MS),
        })
    }

    /// What of `spent` is counted: nothing for call meters (a granted
    /// call is counted when granted), at most `bound` for tokens and cost
    /// (what the node was granted in the window and half the limit).
    fn spent(&self, node: &str, key: &QuotaKey, spent: u64, bound: u64) -> u64 {
        let meter = key.meter();
        if !matches!(meter, QuotaMeter::TaskModelTokens | QuotaMeter::TaskCost) {
            return 0;
        }
        if spent <= bound {
            return spent;
        }
        let times = refusals::count(Reason::SpentPastGrant);
        // The 1st, 2nd, 4th… such report: a rogue node does not flood the log.
        if times.is_power_of_two() {
            warn!(node, quota = %describe_key(key), spent, counted = bound, times, "a node said it spent more than SMS granted it in this window and half the limit; counted up to that");
        }
        bound
    }

    /// Refuses a principal `node` may not count `key` (its `counter`) for:
    /// one too long to be a principal, one it names with a delegation SMS
    /// did not seal for it, or one of too many without a delegation.
    fn principal_counted(
        &self,
        node: &str,
        (key, counter): (&QuotaKey, &str),
        window_end: u64,
        delegation: &[u8],
    ) -> Result<(), Refusal> {
        if key.principal.len() > MAX_PRINCIPAL_BYTES {
            let refused = Refusal::LongPrincipal {
                node: node.to_string(),
                task: key.id.clone(),
                len: key.principal.len(),
                max: MAX_PRINCIPAL_BYTES,
            };
            refusals::count(refused.reason());
            return Err(refused);
        }
        let opened = match &self.delegations {
            Some(keys) if !delegation.is_empty() => keys.open(delegation, node),
            _ => Ok(None),
        };
        let refusal = match opened {
            Ok(Some(run)) if run.principal == key.principal => return Ok(()),
            Ok(Some(run)) => Some(format!(
                "it is for principal '{}', not '{}'",
                run.principal, key.principal
            )),
            // An ended run's last tokens count as a principal the node names.
            Err(PerPrincipalError::Delegation(DelegationError::Ended)) | Ok(None) => None,
            Err(why) => Some(why.to_string()),
        };
        let refused = match refusal {
            Some(why) => Refusal::Delegation {
                node: node.to_string(),
                quota: describe_key(key),
                why,
            },
            None if self.principals.admit(node, &key.id, window_end, counter) => return Ok(()),
            None => Refusal::Principals {
                node: node.to_string(),
                task: key.id.clone(),
                max: principals::MAX_UNSEALED,
            },
        };
        refusals::count(refused.reason());
        Err(refused)
    }

    /// The limit of `key`'s quota as SMS holds it, and whether it is per
    /// principal; `None` when there is no such quota.
    async fn rate(&self, key: &QuotaKey) -> Result<Option<(Rate, bool)>, QuotaError> {
        match key.meter() {
            QuotaMeter::Unspecified => Err(QuotaError::NoMeter),
            QuotaMeter::ServerCalls | QuotaMeter::ServerToolCalls => Ok(self.server_rate(key)),
            meter => {
                let Some(quota) = self.task_quota(&key.id).await? else {
                    return Ok(None);
                };
                Ok(quota
                    .rate(meter)
                    .ok()
                    .flatten()
                    .map(|rate| (rate, quota.per_principal)))
            }
        }
    }

    fn server_rate(&self, key: &QuotaKey) -> Option<(Rate, bool)> {
        let quota = self.hub.with_servers(|_, _, servers| {
            servers
                .get(&key.id)
                .and_then(|record| record.spec.as_ref())
                .and_then(|spec| spec.quota.clone())
        })?;
        let rate = match key.meter() {
            QuotaMeter::ServerCalls => quota.calls,
            _ => quota.tools.get(&key.tool).copied(),
        };
        rate.map(|rate| (rate, false))
    }

    async fn task_quota(&self, task: &str) -> Result<Option<TaskQuota>, QuotaError> {
        if let Some((read, quota)) = self.task_quotas.lock().get(task) {
            if read.elapsed() < TASK_QUOTA_FRESH {
                return Ok(quota.clone());
            }
        }
        let quota = match self.tasks.get(task).await {
            Ok(spec) => spear_proto::task::parse_task_config(&spec.config_json)
                .ok()
                .and_then(|config| config.quota),
            Err(TaskError::NotFound(_)) => None,
            Err(error) => {
                return Err(QuotaError::Task {
                    task: task.to_string(),
                    error,
                })
            }
        };
        let mut cache = self.task_quotas.lock();
        if cache.len() >= crate::tasks::MAX_TASKS {
            cache.clear();
        }
        cache.insert(task.to_string(), (Instant::now(), quota.clone()));
        Ok(quota)
    }
}

/// `key` in a sentence: "task 'notes''s tool calls".
fn describe_key(key: &QuotaKey) -> String {
    let (whose, setting) = spear_proto::quota::describe(key);
    format!("{whose}'s quota ({setting})")
}

/// The counter a key counts in: the task's or server's, the principal's
/// own when the quota is per principal (by digest: a principal may be any
/// text, a counter key is a path).
pub fn counter_key(key: &QuotaKey, per_principal: bool) -> String {
    let meter = key.meter();
    match meter {
        QuotaMeter::ServerCalls => format!("server/{}/calls", key.id),
        QuotaMeter::ServerToolCalls => format!("server/{}/tool/{}", key.id, key.tool),
        _ => {
            let name = match meter {
                QuotaMeter::TaskModelTokens => "model_tokens",
                QuotaMeter::TaskCost => "cost",
                _ => "tool_calls",
            };
            if per_principal {
                let digest = hex::encode(&Sha256::digest(key.principal.as_bytes())[..16]);
                format!("task/{}/{name}/{digest}", key.id)
            } else {
                format!("task/{}/{name}", key.id)
            }
        }
    }
}

#[cfg(test)]
mod tests;
