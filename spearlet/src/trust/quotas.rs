//! A run's fleet quotas (docs/quotas.md): what each call and model request
//! of the run counts against, taken from the node's slices
//! ([`crate::quota::NodeQuotas`]) before it is made.

use std::sync::atomic::Ordering;

use spear_proto::v1::{QuotaMeter, ServerQuota};

use super::RunTrust;
use crate::quota::{call_keys, model_keys, QuotaRefused};

/// Why a model request is not made: a quota is spent, or cannot be held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelQuotaRefused {
    #[error(transparent)]
    Quota(#[from] QuotaRefused),
    #[error("task '{task}' has a cost quota (quota.cost_usd), but model '{model}' has no price in this node's [llm.prices], so its cost cannot be counted; price the model, or the request is not made")]
    Unpriced { task: String, model: String },
}

impl RunTrust {
    /// One unit of every quota a call of `tool` on server `server` (whose
    /// file's quota is `server_quota`) counts against; the first that
    /// refuses says why. (Units taken from quotas before the refusing one
    /// stay spent: the call was attempted.)
    pub async fn call_quota(
        &self,
        server: &str,
        server_quota: Option<&ServerQuota>,
        tool: &str,
    ) -> Result<(), QuotaRefused> {
        let Some(quotas) = &self.node.quotas else {
            return Ok(());
        };
        let scope = &self.scope;
        if scope.quota.as_ref().is_none_or(|q| q.tool_calls.is_none()) && server_quota.is_none() {
            return Ok(());
        }
        let principal = self.quota_principal();
        let task = (scope.task_id.as_str(), scope.quota.as_ref());
        let delegation = self.delegation();
        for quota in call_keys(task, &principal, (server, server_quota), tool) {
            quotas
                .take(&quota.key, quota.on_unreachable, true, &delegation)
                .await?;
        }
        Ok(())
    }

    /// Before a model request of `model` (`priced` when the node's price
    /// table names it): every model quota of the run has a unit left.
    pub async fn model_quota(&self, model: &str, priced: bool) -> Result<(), ModelQuotaRefused> {
        let Some(quotas) = &self.node.quotas else {
            return Ok(());
        };
        let scope = &self.scope;
        let principal = self.quota_principal();
        for quota in model_keys(&scope.task_id, scope.quota.as_ref(), &principal) {
            if quota.key.meter() == QuotaMeter::TaskCost && !priced {
                return Err(ModelQuotaRefused::Unpriced {
                    task: scope.task_id.clone(),
                    model: model.to_string(),
                });
            }
            quotas
                .take(&quota.key, quota.on_unreachable, false, &self.delegation())
                .await?;
        }
        Ok(())
    }

    /// After a model request: its tokens and cost, spent from the run's
    /// model quotas.
    pub async fn model_spent(&self, tokens: u64, cost_nano_usd: Option<u64>) {
        let Some(quotas) = &self.node.quotas else {
            return;
        };
        let scope = &self.scope;
        let principal = self.quota_principal();
        for quota in model_keys(&scope.task_id, scope.quota.as_ref(), &principal) {
            let units = match quota.key.meter() {
                QuotaMeter::TaskCost => cost_nano_usd.unwrap_or(0),
                _ => tokens,
            };
            quotas.spend(&quota.key, units, &self.delegation()).await;
        }
    }

    /// The run's principal as its task's quota counts it: only a quota
    /// per principal needs it.
    fn quota_principal(&self) -> String {
        match &self.scope.quota {
            Some(quota) if quota.per_principal => self.scope.principal.label(),
            _ => String::new(),
        }
    }

    /// The run's delegation, which shows SMS it sent this node the run
    /// (for a quota per principal); empty when it sent none.
    fn delegation(&self) -> bytes::Bytes {
        self.scope
            .on_behalf
            .as_ref()
            .map(|on_behalf| on_behalf.delegation.clone())
            .unwrap_or_default()
    }

    /// Marks the run as ended by a quota: its reply's `stop_reason`.
    pub fn stopped_by_quota(&self) {
        self.quota_stop.store(true, Ordering::Relaxed);
    }
}
