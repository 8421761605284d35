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
//! ```text
//!   node ──TakeQuota(key, spent, want)──▶ QuotaBook ──limit──▶ task config / server file
//!                                             │
//!                                             └──take(window)──▶ Counters (memory | etcd)
//! ```

mod counters;
mod etcd;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use spear_proto::quota::{refill_at, TaskQuota};
use spear_proto::v1::{QuotaKey, QuotaMeter, Rate, TakeQuotaResponse};

pub use counters::{slice, CounterError, Counters, MemoryCounters, Taken, Want};
pub use etcd::EtcdCounters;

use crate::tasks::{TaskError, TaskStore};
use crate::watch::Hub;

/// How long a task's quota is read from SMS's memory before the task
/// store is asked again: a changed quota holds within this.
const TASK_QUOTA_FRESH: Duration = Duration::from_secs(2);
/// How long a node counts nothing for a quota SMS does not hold.
const UNLIMITED_FOR_MS: u64 = 5_000;

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
}

/// Every quota counter SMS keeps, and where each quota's limit is read.
pub struct QuotaBook {
    counters: Arc<dyn Counters>,
    tasks: Arc<dyn TaskStore>,
    hub: Arc<Hub>,
    task_quotas: Mutex<HashMap<String, (Instant, Option<TaskQuota>)>>,
}

impl QuotaBook {
    pub fn new(counters: Arc<dyn Counters>, tasks: Arc<dyn TaskStore>, hub: Arc<Hub>) -> Self {
        Self {
            counters,
            tasks,
            hub,
            task_quotas: Mutex::default(),
        }
    }

    /// A slice of `key`'s quota after counting `spent`; see the module docs.
    pub async fn take(
        &self,
        key: &QuotaKey,
        spent: u64,
        want: u64,
    ) -> Result<TakeQuotaResponse, QuotaError> {
        if key.id.is_empty() {
            return Err(QuotaError::NoId);
        }
        let now = spear_common::clock::now_ms();
        let Some((rate, per_principal)) = self.rate(key).await? else {
            return Ok(TakeQuotaResponse {
                unlimited: true,
                refill_at_ms: now + UNLIMITED_FOR_MS,
                ..TakeQuotaResponse::default()
            });
        };
        let window_end = refill_at(now, rate.per_ms);
        let counter = counter_key(key, per_principal);
        // A node asks for no more than a full slice at a time.
        let want = match want {
            0 => Want::Slice,
            units => Want::Units(units.min(slice(rate.max, 0))),
        };
        let taken = self
            .counters
            .take(&counter, window_end, rate.max, spent, want)
            .await?;
        Ok(TakeQuotaResponse {
            granted: taken.granted,
            rate: Some(rate),
            used: taken.used,
            refill_at_ms: window_end,
            unlimited: false,
        })
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
