//! Tool trust on the node (docs/trust.md), beyond pins
//! (which live with the connections): approvals bound to one call, and
//! the audit trail. [`NodeTrust`] is built once per node; each run gets a
//! [`RunTrust`] with who its calls are made for.

pub mod approvals;
pub mod audit;
pub mod meters;
mod quotas;

use std::sync::Arc;

use approvals::Approver;
use audit::AuditLog;
pub use quotas::ModelQuotaRefused;

/// The node's trust parts (each absent when not configured, as in
/// benches and unit tests).
#[derive(Clone, Default)]
pub struct NodeTrust {
    pub node_id: String,
    pub approvals: Option<Approver>,
    pub audit: Option<AuditLog>,
    /// The node's slices of fleet quotas.
    pub quotas: Option<crate::quota::NodeQuotas>,
    /// Model usage by task, principal and model, for the node's metrics.
    pub meters: Arc<meters::UsageMeters>,
}

/// Who one run's calls are made for.
#[derive(Debug, Clone, Default)]
pub struct RunScope {
    pub task_id: String,
    /// A fresh id per invocation, in every approval and record of the run.
    pub invocation_id: String,
    /// Who asked for the run, as the node saw its caller.
    pub identity: String,
    /// Who the run is for: the principal SMS verified, or the admin who
    /// invoked the node directly.
    pub principal: spear_proto::v1::Principal,
    /// Who acts for the principal: `node/<id>`.
    pub actor: String,
    /// The run's person and what SMS delegated to the run, for servers
    /// that act per principal; `None` when no person invoked it.
    pub on_behalf: Option<crate::mcp::OnBehalf>,
    /// When the run ends: an approval never waits past it.
    pub deadline: Option<std::time::Instant>,
    /// The task's fleet quota (its config's `"quota"`).
    pub quota: Option<spear_proto::quota::TaskQuota>,
}

/// A run's trust parts.
#[derive(Clone, Default)]
pub struct RunTrust {
    pub node: NodeTrust,
    pub scope: Arc<RunScope>,
    /// What the run's records add up to (its reply's `usage`), counted by
    /// the rule `sms usage` counts with.
    pub used: Arc<parking_lot::Mutex<spear_proto::usage::Used>>,
    /// Set when a quota ended the run.
    pub quota_stop: Arc<std::sync::atomic::AtomicBool>,
}

impl RunTrust {
    /// Appends `record` with the run's ids; its seq (0 without a log).
    pub fn audit(&self, mut record: spear_proto::audit::Record) -> u64 {
        self.used.lock().add(&record);
        let Some(log) = &self.node.audit else {
            return 0;
        };
        if record.task.is_empty() {
            record.task.clone_from(&self.scope.task_id);
        }
        if record.invocation.is_empty() {
            record.invocation.clone_from(&self.scope.invocation_id);
        }
        if record.identity.is_empty() {
            record.identity.clone_from(&self.scope.identity);
        }
        if record.principal.is_empty() {
            record.principal = self.scope.principal.label();
        }
        if record.actor.is_empty() {
            record.actor.clone_from(&self.scope.actor);
        }
        self.node.meters.add(&record);
        log.append(record)
    }

    /// Waits until every record this node appended so far is on disk:
    /// before a model request, so no result reaches the model unrecorded.
    pub async fn durable(&self) -> Result<(), audit::Unwritable> {
        match &self.node.audit {
            Some(log) => log.durable(log.last()).await,
            None => Ok(()),
        }
    }
}

/// A fresh invocation id.
pub fn invocation_id() -> String {
    format!("inv-{:016x}", rand::random::<u64>())
}
