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
//! Approvals live in this SMS's memory: a node asks, waits and claims on
//! the replica it is connected to (docs/trust.md says what that means
//! for several replicas).

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use spear_proto::approvals::{DEFAULT_EXPIRY, MAX_EXPIRY};
use spear_proto::v1::{ApprovalBinding, ApprovalInfo, ApprovalState};
use tokio::sync::watch;
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

/// Why a request, decision or claim is refused; each names the approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval '{0}' (it may have been decided more than an hour ago); `sms approvals list` shows the current ones")]
    Unknown(String),
    #[error("the approval request is missing its {0}")]
    Missing(&'static str),
    #[error("the arguments the approval would show do not hash to the digest it binds; an operator would approve one call and the node run another")]
    ShownNotBound,
    #[error("the call's arguments are {0} bytes, over the {MAX_ARGUMENTS} an approval keeps")]
    LargeArguments(usize),
    #[error("node '{0}' already has {MAX_PENDING_PER_NODE} approvals pending; decide or let some expire first")]
    TooManyForNode(String),
    #[error("task '{0}' already has {MAX_PENDING_PER_TASK} approvals pending across its nodes; decide or let some expire first")]
    TooManyForTask(String),
    #[error("SMS holds {MAX_APPROVALS} approvals; decide or let some expire first")]
    TooMany,
    #[error("approval '{id}' belongs to node '{owner}'")]
    OtherNode { id: String, owner: String },
    #[error("approval '{id}' is {state}, so it cannot be {action}")]
    NotPending {
        id: String,
        state: &'static str,
        action: &'static str,
    },
    #[error("approval '{id}' was for another call: its {field} differs, so this call needs its own approval")]
    OtherCall { id: String, field: &'static str },
}

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

struct Entry {
    info: ApprovalInfo,
    /// The arguments, while pending.
    arguments: Option<String>,
    expires_at: Instant,
    decided_at: Option<Instant>,
    changed: watch::Sender<ApprovalState>,
}

impl Entry {
    fn state(&self) -> ApprovalState {
        self.info.state()
    }

    /// Moves a pending approval past its expiry to `Expired`.
    fn expire_if_due(&mut self, now: Instant) {
        if self.state() == ApprovalState::Pending && now >= self.expires_at {
            self.settle(
                ApprovalState::Expired,
                "nobody decided before it expired",
                "",
                now,
            );
        }
    }

    fn settle(&mut self, state: ApprovalState, reason: &str, by: &str, now: Instant) {
        self.info.set_state(state);
        self.info.reason = reason.to_string();
        self.info.decided_by = by.to_string();
        self.arguments = None;
        self.decided_at = Some(now);
        self.changed.send_replace(state);
    }
}

/// Every approval this SMS holds.
#[derive(Default)]
pub struct ApprovalBook {
    entries: Mutex<HashMap<String, Entry>>,
}

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

/// Whether the arguments an operator will read are the ones the digest
/// binds. Where the node replaced a secret of the server's (the marker
/// [`REDACTED`](spear_proto::refs::REDACTED)), SMS never sees the value and
/// cannot hash it; the page says the shown arguments are redacted there.
fn shown_is_bound(shown: &str, digest: &str) -> bool {
    let hashed = spear_proto::approvals::arguments_digest(shown).unwrap_or_else(|| {
        spear_proto::pins::digest(&serde_json::Value::String(shown.to_string()))
    });
    hashed == digest || shown.contains(spear_proto::refs::REDACTED)
}

impl ApprovalBook {
    /// A new pending approval for `binding`; its id and expiry.
    pub fn request(
        &self,
        binding: ApprovalBinding,
        arguments: String,
        expires_in: Duration,
    ) -> Result<ApprovalInfo, ApprovalError> {
        for (field, value) in [
            ("node", &binding.node_id),
            ("server", &binding.server_id),
            ("tool", &binding.tool),
            ("invocation", &binding.invocation_id),
            ("arguments digest", &binding.arguments_digest),
        ] {
            if value.is_empty() {
                return Err(ApprovalError::Missing(field));
            }
        }
        if arguments.len() > MAX_ARGUMENTS {
            return Err(ApprovalError::LargeArguments(arguments.len()));
        }
        if !shown_is_bound(&arguments, &binding.arguments_digest) {
            return Err(ApprovalError::ShownNotBound);
        }
        let expires_in = match expires_in {
            Duration::ZERO => DEFAULT_EXPIRY,
            given => given.min(MAX_EXPIRY),
        };
        let now = Instant::now();
        let mut entries = self.entries.lock();
        Self::trim(&mut entries, now);
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
            return Err(ApprovalError::TooManyForNode(binding.node_id));
        }
        if pending_task >= MAX_PENDING_PER_TASK {
            return Err(ApprovalError::TooManyForTask(binding.task_id));
        }
        if entries.len() >= MAX_APPROVALS {
            return Err(ApprovalError::TooMany);
        }
        let id = format!("ap-{:016x}", rand::random::<u64>());
        let mut info = ApprovalInfo {
            approval_id: id.clone(),
            binding: Some(binding),
            created_at_ms: epoch_ms(Duration::ZERO),
            expires_at_ms: epoch_ms(expires_in),
            ..ApprovalInfo::default()
        };
        info.set_state(ApprovalState::Pending);
        let (changed, _) = watch::channel(ApprovalState::Pending);
        entries.insert(
            id,
            Entry {
                info: info.clone(),
                arguments: Some(arguments),
                expires_at: now + expires_in,
                decided_at: None,
                changed,
            },
        );
        Ok(info)
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
            // Decided, or the wait or expiry came: either way, look again.
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
    pub fn claim(&self, id: &str, binding: &ApprovalBinding) -> Result<(), ApprovalError> {
        let mut entries = self.entries.lock();
        let now = Instant::now();
        let entry = Self::owned(&mut entries, &binding.node_id, id)?;
        entry.expire_if_due(now);
        if entry.state() != ApprovalState::Approved {
            return Err(ApprovalError::NotPending {
                id: id.to_string(),
                state: state_name(entry.state()),
                action: "used for a call",
            });
        }
        let approved = entry.info.binding.clone().unwrap_or_default();
        let fields: [(&'static str, &str, &str); 8] = [
            ("task", &approved.task_id, &binding.task_id),
            (
                "invocation",
                &approved.invocation_id,
                &binding.invocation_id,
            ),
            ("identity", &approved.identity, &binding.identity),
            ("server", &approved.server_id, &binding.server_id),
            ("tool", &approved.tool, &binding.tool),
            (
                "arguments",
                &approved.arguments_digest,
                &binding.arguments_digest,
            ),
            (
                "tool definition (pin)",
                &approved.pin_digest,
                &binding.pin_digest,
            ),
            ("node", &approved.node_id, &binding.node_id),
        ];
        if let Some((field, _, _)) = fields.iter().find(|(_, a, b)| a != b) {
            return Err(ApprovalError::OtherCall {
                id: id.to_string(),
                field,
            });
        }
        if approved.policy_revision != binding.policy_revision {
            return Err(ApprovalError::OtherCall {
                id: id.to_string(),
                field: "policy revision",
            });
        }
        let by = entry.info.decided_by.clone();
        let reason = entry.info.reason.clone();
        entry.settle(ApprovalState::Used, &reason, &by, now);
        Ok(())
    }

    /// An admin's decision on pending approval `id`.
    pub fn decide(
        &self,
        id: &str,
        approve: bool,
        reason: &str,
        by: &str,
    ) -> Result<ApprovalInfo, ApprovalError> {
        let mut entries = self.entries.lock();
        let now = Instant::now();
        let entry = entries
            .get_mut(id)
            .ok_or_else(|| ApprovalError::Unknown(id.to_string()))?;
        entry.expire_if_due(now);
        if entry.state() != ApprovalState::Pending {
            return Err(ApprovalError::NotPending {
                id: id.to_string(),
                state: state_name(entry.state()),
                action: if approve { "approved" } else { "denied" },
            });
        }
        let state = if approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        entry.settle(state, reason, by, now);
        Ok(entry.info.clone())
    }

    /// Every approval held, newest first, without arguments.
    pub fn list(&self) -> Vec<ApprovalInfo> {
        let mut entries = self.entries.lock();
        let now = Instant::now();
        Self::trim(&mut entries, now);
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

    /// Forgets approvals decided more than [`KEEP_DECIDED`] ago.
    fn trim(entries: &mut HashMap<String, Entry>, now: Instant) {
        entries.retain(|_, e| {
            e.expire_if_due(now);
            e.decided_at
                .is_none_or(|at| now.duration_since(at) < KEEP_DECIDED)
        });
    }
}
