//! The book's mirror of the stored approvals (etcd): versions other replicas wrote come in
//! here, so any replica lists, decides and wakes the waiters of any approval.

use std::time::Duration;

use spear_proto::v1::{ApprovalInfo, ApprovalState};
use tokio::sync::watch;
use tokio::time::Instant;

use super::entry::Entry;
use super::ApprovalBook;

impl ApprovalBook {
    /// Takes `info` (with its arguments while pending), stored at
    /// `revision`, into the mirror: a newer version replaces the one held,
    /// and a changed state wakes its waiters.
    pub fn mirror(&self, mut info: ApprovalInfo, revision: i64) {
        let arguments = std::mem::take(&mut info.arguments);
        let mut entries = self.entries.lock();
        let now = Instant::now();
        if let Some(entry) = entries.get_mut(&info.approval_id) {
            if revision != 0 && revision <= entry.revision {
                return;
            }
            entry.revision = revision;
            let (before, state) = (entry.state(), info.state());
            entry.info = info;
            if state == ApprovalState::Pending {
                entry.arguments = Some(arguments);
            } else {
                entry.arguments = None;
                entry.decided_at.get_or_insert(now);
            }
            if before != state {
                entry.changed.send_replace(state);
            }
            return;
        }
        let left = info
            .expires_at_ms
            .saturating_sub(spear_common::clock::now_ms());
        let state = info.state();
        let (changed, _) = watch::channel(state);
        entries.insert(
            info.approval_id.clone(),
            Entry {
                info,
                arguments: (state == ApprovalState::Pending).then_some(arguments),
                expires_at: now + Duration::from_millis(left),
                decided_at: (state != ApprovalState::Pending).then_some(now),
                changed,
                revision,
            },
        );
    }

    /// Mirrors every stored approval (a start, or a reload after the
    /// watch broke).
    pub fn mirror_all(&self, stored: Vec<(ApprovalInfo, i64)>) {
        for (info, revision) in stored {
            self.mirror(info, revision);
        }
    }

    /// Drops approval `id` from the mirror (removed from etcd).
    pub fn forget(&self, id: &str) {
        self.entries.lock().remove(id);
    }
}
