//! Approvals bound to one call, SMS's side (docs/trust.md). Entry point:
//! [`ApprovalBook`].
//!
//! Each approval moves through one small state machine:
//!
//! ```text
//!   Pending ──approve──▶ Approved ──claim (same binding)──▶ Used
//!      │ deny                │ (expiry no longer applies)
//!      ▼                     ▼
//!   Denied            claim with another binding: refused, stays Approved
//!      │
//!   Pending ──expiry──▶ Expired
//! ```
//!
//! A node asks for an approval with the call's binding (task, invocation,
//! node, identity, server, tool, arguments digest, pin digest, policy
//! revision), waits for it without holding anything but a watch channel,
//! and claims it once with the binding of the call it is about to make:
//! any field that differs refuses the claim, so an approval is for that
//! call only. Arguments are kept only while pending, for `show`.
//!
//! With one SMS, approvals live in its memory. With replicas on etcd
//! ([`etcd`]), each approval is stored there and every replica mirrors
//! them all: any replica lists and decides any approval, a wait on one is
//! released by a decision on another, and a restart loses none. Every
//! change is a transition computed on the mirror and committed on the
//! stored version it was computed from (`ApprovalBook::transition`); a
//! replica that lost the race takes the winner's version and tries again.

mod binding;
mod entry;
mod error;
pub mod etcd;
mod mirror;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use binding::{check_request, differing_field};
use entry::Entry;
pub use error::ApprovalError;
use etcd::{EtcdApprovals, Written};
use parking_lot::Mutex;
use spear_proto::approvals::{DEFAULT_EXPIRY, MAX_EXPIRY};
use spear_proto::v1::{ApprovalBinding, ApprovalInfo, ApprovalState};
use tokio::time::Instant;

/// Approvals pending at once for one node, for one task (across its
/// nodes), and in all: no node and no task fills the fleet's book.
pub const MAX_PENDING_PER_NODE: usize = 64;
pub const MAX_PENDING_PER_TASK: usize = 256;
pub const MAX_APPROVALS: usize = 10_000;
/// Bytes of one call's arguments kept for `show`.
pub const MAX_ARGUMENTS: usize = 64 * 1024;
/// How long a node's one wait may last before it asks again.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// How long a decided approval stays listed.
const KEEP_DECIDED: Duration = Duration::from_secs(3600);

/// The name of a state, for sentences and the CLI.
pub fn state_name(state: ApprovalState) -> &'static str {
    match state {
        ApprovalState::Pending => "pending",
        ApprovalState::Approved => "approved",
        ApprovalState::Denied => "denied",
        ApprovalState::Expired => "expired",
        ApprovalState::Used => "used",
        ApprovalState::Unspecified => "unknown",
    }
}

/// Every approval this SMS holds (on etcd: mirrors).
#[derive(Default)]
pub struct ApprovalBook {
    entries: Mutex<HashMap<String, Entry>>,
    shared: Option<EtcdApprovals>,
}

/// Tries of one transition against other replicas' writes.
const MAX_TRIES: usize = 8;

/// What a wait ended on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub state: ApprovalState,
    pub reason: String,
    pub decided_by: String,
}

fn epoch_ms(after: Duration) -> u64 {
    spear_common::clock::unix_ms(SystemTime::now() + after)
}

impl ApprovalBook {
    /// A book stored in `shared` (etcd), or in memory.
    pub fn on(shared: Option<EtcdApprovals>) -> Self {
        Self {
            entries: Mutex::default(),
            shared,
        }
    }

    /// A new pending approval for `binding`; its id and expiry.
    pub async fn request(
        &self,
        binding: ApprovalBinding,
        arguments: String,
        expires_in: Duration,
    ) -> Result<ApprovalInfo, ApprovalError> {
        check_request(&binding, &arguments)?;
        let expires_in = match expires_in {
            Duration::ZERO => DEFAULT_EXPIRY,
            given => given.min(MAX_EXPIRY),
        };
        self.check_room(&binding)?;
        let mut info = ApprovalInfo {
            approval_id: format!("ap-{:016x}", rand::random::<u64>()),
            binding: Some(binding),
            created_at_ms: epoch_ms(Duration::ZERO),
            expires_at_ms: epoch_ms(expires_in),
            arguments,
            ..ApprovalInfo::default()
        };
        info.set_state(ApprovalState::Pending);
        let revision = match self.commit(&info, 0).await? {
            Written::At(revision) => revision,
            Written::Conflict(_) => return Err(ApprovalError::Contended(info.approval_id)),
        };
        self.mirror(info.clone(), revision);
        info.arguments.clear();
        Ok(info)
    }

    /// Refuses a request when its node, its task or the book is full.
    fn check_room(&self, binding: &ApprovalBinding) -> Result<(), ApprovalError> {
        let mut entries = self.entries.lock();
        self.trim(&mut entries, Instant::now());
        let (mut pending_here, mut pending_task) = (0, 0);
        for pending in entries
            .values()
            .filter(|e| e.state() == ApprovalState::Pending)
            .filter_map(|e| e.info.binding.as_ref())
        {
            pending_here += usize::from(pending.node_id == binding.node_id);
            pending_task += usize::from(pending.task_id == binding.task_id);
        }
        if pending_here >= MAX_PENDING_PER_NODE {
            return Err(ApprovalError::TooManyForNode(binding.node_id.clone()));
        }
        if pending_task >= MAX_PENDING_PER_TASK {
            return Err(ApprovalError::TooManyForTask(binding.task_id.clone()));
        }
        if entries.len() >= MAX_APPROVALS {
            return Err(ApprovalError::TooMany);
        }
        Ok(())
    }

    /// Waits up to `wait` (capped) for `node`'s approval `id` to be
    /// decided or expire; answers its state then.
    pub async fn wait(
        &self,
        node: &str,
        id: &str,
        wait: Duration,
    ) -> Result<Decision, ApprovalError> {
        let (mut changed, expires_at) = {
            let mut entries = self.entries.lock();
            let entry = Self::owned(&mut entries, node, id)?;
            entry.expire_if_due(Instant::now());
            (entry.changed.subscribe(), entry.expires_at)
        };
        if *changed.borrow_and_update() == ApprovalState::Pending {
            let until = (Instant::now() + wait.min(MAX_WAIT)).min(expires_at);
            // Decided (here or, on etcd, by another replica), or the wait
            // or expiry came: either way, look again.
            let _ = tokio::time::timeout_at(until, changed.changed()).await;
        }
        let mut entries = self.entries.lock();
        let entry = Self::owned(&mut entries, node, id)?;
        entry.expire_if_due(Instant::now());
        Ok(Decision {
            state: entry.state(),
            reason: entry.info.reason.clone(),
            decided_by: entry.info.decided_by.clone(),
        })
    }

    /// Uses approved approval `id` for the call `binding` describes: once,
    /// and only if every field is the one approved.
    pub async fn claim(&self, id: &str, binding: &ApprovalBinding) -> Result<(), ApprovalError> {
        self.transition(id, |entries, _now| {
            let entry = Self::owned(entries, &binding.node_id, id)?;
            if entry.state() != ApprovalState::Approved {
                return Err(ApprovalError::NotPending {
                    id: id.to_string(),
                    state: state_name(entry.state()),
                    action: "used for a call",
                });
            }
            let approved = entry.info.binding.clone().unwrap_or_default();
            if let Some(field) = differing_field(&approved, binding) {
                return Err(ApprovalError::OtherCall {
                    id: id.to_string(),
                    field,
                });
            }
            let mut used = entry.info.clone();
            used.set_state(ApprovalState::Used);
            Ok(used)
        })
        .await
        .map(|_| ())
    }

    /// An admin's decision on pending approval `id`.
    pub async fn decide(
        &self,
        id: &str,
        approve: bool,
        reason: &str,
        by: &str,
    ) -> Result<ApprovalInfo, ApprovalError> {
        self.transition(id, |entries, _now| {
            let entry = entries
                .get_mut(id)
                .ok_or_else(|| ApprovalError::Unknown(id.to_string()))?;
            if entry.state() != ApprovalState::Pending {
                return Err(ApprovalError::NotPending {
                    id: id.to_string(),
                    state: state_name(entry.state()),
                    action: if approve { "approved" } else { "denied" },
                });
            }
            let mut decided = entry.info.clone();
            decided.set_state(if approve {
                ApprovalState::Approved
            } else {
                ApprovalState::Denied
            });
            decided.reason = reason.to_string();
            decided.decided_by = by.to_string();
            Ok(decided)
        })
        .await
    }

    /// Moves approval `id` as `next` says (computed on the mirror, expiry
    /// applied first), committed on the version it was computed from; on a
    /// conflict, the stored version is mirrored and `next` asked again.
    async fn transition(
        &self,
        id: &str,
        next: impl Fn(&mut HashMap<String, Entry>, Instant) -> Result<ApprovalInfo, ApprovalError>,
    ) -> Result<ApprovalInfo, ApprovalError> {
        for _ in 0..MAX_TRIES {
            let (info, expected) = {
                let mut entries = self.entries.lock();
                let now = Instant::now();
                if let Some(entry) = entries.get_mut(id) {
                    entry.expire_if_due(now);
                }
                let info = next(&mut entries, now)?;
                let expected = entries.get(id).map_or(0, |e| e.revision);
                (info, expected)
            };
            match self.commit(&info, expected).await? {
                Written::At(revision) => {
                    self.mirror(info.clone(), revision);
                    return Ok(info);
                }
                Written::Conflict(Some(current)) => {
                    let (current, revision) = *current;
                    self.mirror(current, revision);
                }
                Written::Conflict(None) => return Err(ApprovalError::Unknown(id.to_string())),
            }
        }
        Err(ApprovalError::Contended(id.to_string()))
    }

    /// Stores `info` on etcd over version `expected`; in memory there is
    /// nothing to store.
    async fn commit(&self, info: &ApprovalInfo, expected: i64) -> Result<Written, ApprovalError> {
        match &self.shared {
            Some(store) => {
                let mut stored = info.clone();
                if stored.state() != ApprovalState::Pending {
                    stored.arguments.clear();
                }
                store.write(&stored, expected).await
            }
            None => Ok(Written::At(0)),
        }
    }

    /// Every approval held, newest first, without arguments.
    pub fn list(&self) -> Vec<ApprovalInfo> {
        let mut entries = self.entries.lock();
        let now = Instant::now();
        self.trim(&mut entries, now);
        let mut all: Vec<ApprovalInfo> = entries
            .values_mut()
            .map(|e| {
                e.expire_if_due(now);
                e.info.clone()
            })
            .collect();
        all.sort_by(|a, b| {
            b.created_at_ms
                .cmp(&a.created_at_ms)
                .then(a.approval_id.cmp(&b.approval_id))
        });
        all
    }

    /// Approval `id`, with its arguments while it is pending.
    pub fn show(&self, id: &str) -> Result<ApprovalInfo, ApprovalError> {
        let mut entries = self.entries.lock();
        let entry = entries
            .get_mut(id)
            .ok_or_else(|| ApprovalError::Unknown(id.to_string()))?;
        entry.expire_if_due(Instant::now());
        Ok(ApprovalInfo {
            arguments: entry.arguments.clone().unwrap_or_default(),
            ..entry.info.clone()
        })
    }

    fn owned<'e>(
        entries: &'e mut HashMap<String, Entry>,
        node: &str,
        id: &str,
    ) -> Result<&'e mut Entry, ApprovalError> {
        let entry = entries
            .get_mut(id)
            .ok_or_else(|| ApprovalError::Unknown(id.to_string()))?;
        let owner = entry
            .info
            .binding
            .as_ref()
            .map_or("", |b| b.node_id.as_str());
        if owner != node {
            return Err(ApprovalError::OtherNode {
                id: id.to_string(),
                owner: owner.to_string(),
            });
        }
        Ok(entry)
    }

    /// Forgets approvals decided (or expired) more than [`KEEP_DECIDED`]
    /// ago; on etcd, removes them there too (any replica may: removing is
    /// idempotent).
    fn trim(&self, entries: &mut HashMap<String, Entry>, now: Instant) {
        let mut gone = Vec::new();
        entries.retain(|id, e| {
            e.expire_if_due(now);
            let keep = e
                .decided_at
                .is_none_or(|at| now.duration_since(at) < KEEP_DECIDED);
            if !keep {
                gone.push(id.clone());
            }
            keep
        });
        if let (Some(store), false) = (&self.shared, gone.is_empty()) {
            let store = store.clone();
            tokio::spawn(async move {
                for id in gone {
                    store.delete(&id).await;
                }
            });
        }
    }
}
