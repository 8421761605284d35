//! One approval as the book holds it, and the two steps of its state machine the book takes
//! on its own: expiry and settling.

use spear_proto::v1::{ApprovalInfo, ApprovalState};
use tokio::sync::watch;
use tokio::time::Instant;

/// One approval held: what is listed, what only `show` gives, and who waits on it.
pub(super) struct Entry {
    pub(super) info: ApprovalInfo,
    /// The arguments, while pending.
    pub(super) arguments: Option<String>,
    pub(super) expires_at: Instant,
    pub(super) decided_at: Option<Instant>,
    pub(super) changed: watch::Sender<ApprovalState>,
    /// The stored version this mirrors (etcd's mod revision; 0 in memory
    /// or not stored yet).
    pub(super) revision: i64,
}

impl Entry {
    pub(super) fn state(&self) -> ApprovalState {
        self.info.state()
    }

    /// Moves a pending approval past its expiry to `Expired`.
    pub(super) fn expire_if_due(&mut self, now: Instant) {
        if self.state() == ApprovalState::Pending && now >= self.expires_at {
            self.settle(
                ApprovalState::Expired,
                "nobody decided before it expired",
                "",
                now,
            );
        }
    }

    pub(super) fn settle(&mut self, state: ApprovalState, reason: &str, by: &str, now: Instant) {
        self.info.set_state(state);
        self.info.reason = reason.to_string();
        self.info.decided_by = by.to_string();
        self.arguments = None;
        self.decided_at = Some(now);
        self.changed.send_replace(state);
    }
}
