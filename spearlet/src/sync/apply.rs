//! The rules a node follows when applying the watch stream (docs/protocol.md),
//! as a pure state machine: events in, new views out, or "resynchronise".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use spear_proto::v1::{watch_event, Delta, ServerRecord, SnapshotFrame, WatchEvent};

use crate::persist::Applied;
use crate::registry::RegistryView;

/// A change the node must apply.
#[derive(Debug, Clone)]
pub struct Update {
    pub view: Arc<RegistryView>,
    pub affected: BTreeSet<String>,
    /// What `applied.log` records.
    pub applied: Applied,
}

/// What one event means for the node.
#[derive(Debug)]
pub enum Step {
    /// Apply this.
    Apply(Update),
    /// Nothing to apply (a frame of an incomplete snapshot, a duplicate).
    Nothing,
    /// SMS's current revision, from a progress message.
    Progress { epoch: u64, revision: u64 },
    /// The stream cannot be trusted from here: drop it and ask for a snapshot.
    Resync(String),
}

#[derive(Debug)]
struct PendingSnapshot {
    epoch: u64,
    revision: u64,
    total: u32,
    next_index: u32,
    servers: BTreeMap<String, Arc<ServerRecord>>,
}

/// The per-stream state of the rules: the snapshot being assembled.
#[derive(Debug, Default)]
pub struct Applier {
    pending: Option<PendingSnapshot>,
}

impl Applier {
    /// Interprets `event` against the node's `current` view.
    pub fn step(&mut self, current: &RegistryView, event: WatchEvent) -> Step {
        match event.event {
            Some(watch_event::Event::Snapshot(frame)) => self.frame(current, frame),
            Some(watch_event::Event::Delta(delta)) => {
                if self.pending.is_some() {
                    self.pending = None;
                    return Step::Resync("a delta arrived in the middle of a snapshot".into());
                }
                delta_step(current, delta)
            }
            Some(watch_event::Event::Progress(p)) => Step::Progress {
                epoch: p.epoch,
                revision: p.revision,
            },
            None => Step::Nothing,
        }
    }

    fn frame(&mut self, current: &RegistryView, frame: SnapshotFrame) -> Step {
        if frame.total == 0 || frame.index >= frame.total {
            self.pending = None;
            return Step::Resync(format!(
                "snapshot frame {} of {} is malformed",
                frame.index, frame.total
            ));
        }
        if frame.index == 0 {
            self.pending = Some(PendingSnapshot {
                epoch: frame.epoch,
                revision: frame.revision,
                total: frame.total,
                next_index: 0,
                servers: BTreeMap::new(),
            });
        }
        let Some(pending) = self.pending.as_mut() else {
            return Step::Resync(format!(
                "snapshot frame {} arrived without its first frame",
                frame.index
            ));
        };
        let consistent = pending.epoch == frame.epoch
            && pending.revision == frame.revision
            && pending.total == frame.total
            && pending.next_index == frame.index;
        if !consistent {
            self.pending = None;
            return Step::Resync(
                "snapshot frames are inconsistent; discarding the partial snapshot".into(),
            );
        }
        for record in frame.servers {
            if let Some(spec) = &record.spec {
                pending.servers.insert(spec.id.clone(), Arc::new(record));
            }
        }
        pending.next_index += 1;
        if pending.next_index < pending.total {
            return Step::Nothing;
        }
        let Some(done) = self.pending.take() else {
            return Step::Nothing;
        };
        if done.epoch == current.epoch && done.revision < current.revision {
            // Never go back within an epoch (a lagging replica).
            return Step::Resync(format!(
                "snapshot at revision {} is older than the applied {}",
                done.revision, current.revision
            ));
        }
        if done.epoch == current.epoch && done.revision == current.revision {
            // The state the node has already (a reconnect at the same
            // revision): nothing to apply, and the node is in sync.
            return Step::Progress {
                epoch: done.epoch,
                revision: done.revision,
            };
        }
        let affected = changed_ids(&current.servers, &done.servers);
        let applied = Applied::Snapshot {
            epoch: done.epoch,
            revision: done.revision,
        };
        Step::Apply(Update {
            view: Arc::new(RegistryView {
                epoch: done.epoch,
                revision: done.revision,
                servers: done.servers,
            }),
            affected,
            applied,
        })
    }
}

fn delta_step(current: &RegistryView, delta: Delta) -> Step {
    if current.epoch == 0 || delta.epoch != current.epoch {
        return Step::Resync(format!(
            "delta of epoch {} but the node is at epoch {}",
            delta.epoch, current.epoch
        ));
    }
    if delta.revision <= current.revision {
        return Step::Nothing;
    }
    if delta.prev_revision != current.revision {
        return Step::Resync(format!(
            "gap: delta {}->{} but the node is at {}",
            delta.prev_revision, delta.revision, current.revision
        ));
    }
    let mut servers = current.servers.clone();
    let mut affected = BTreeSet::new();
    for id in delta.deletes {
        servers.remove(&id);
        affected.insert(id);
    }
    for record in delta.upserts {
        if let Some(spec) = &record.spec {
            affected.insert(spec.id.clone());
            servers.insert(spec.id.clone(), Arc::new(record));
        }
    }
    let applied = Applied::Delta {
        epoch: delta.epoch,
        prev: delta.prev_revision,
        revision: delta.revision,
    };
    Step::Apply(Update {
        view: Arc::new(RegistryView {
            epoch: delta.epoch,
            revision: delta.revision,
            servers,
        }),
        affected,
        applied,
    })
}

/// Ids added, removed or changed between two registries.
fn changed_ids(
    old: &BTreeMap<String, Arc<ServerRecord>>,
    new: &BTreeMap<String, Arc<ServerRecord>>,
) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = old
        .keys()
        .filter(|id| !new.contains_key(*id))
        .cloned()
        .collect();
    for (id, record) in new {
        if old.get(id) != Some(record) {
            ids.insert(id.clone());
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use spear_proto::v1::{Progress, ServerSpec};

    fn record(id: &str, rev: u64) -> ServerRecord {
        ServerRecord {
            spec: Some(ServerSpec {
                id: id.into(),
                ..Default::default()
            }),
            source: None,
            mod_revision: rev,
            pins: None,
        }
    }

    fn frame(epoch: u64, revision: u64, index: u32, total: u32, ids: &[&str]) -> WatchEvent {
        WatchEvent {
            event: Some(watch_event::Event::Snapshot(SnapshotFrame {
                epoch,
                revision,
                index,
                total,
                servers: ids.iter().map(|id| record(id, revision)).collect(),
            })),
        }
    }

    fn delta(
        epoch: u64,
        prev: u64,
        revision: u64,
        upserts: &[&str],
        deletes: &[&str],
    ) -> WatchEvent {
        WatchEvent {
            event: Some(watch_event::Event::Delta(Delta {
                epoch,
                revision,
                prev_revision: prev,
                upserts: upserts.iter().map(|id| record(id, revision)).collect(),
                deletes: deletes.iter().map(|s| s.to_string()).collect(),
            })),
        }
    }

    fn apply(applier: &mut Applier, view: &mut RegistryView, event: WatchEvent) -> Step {
        let step = applier.step(view, event);
        if let Step::Apply(update) = &step {
            *view = (*update.view).clone();
        }
        step
    }

    fn ids(view: &RegistryView) -> Vec<&str> {
        view.servers.keys().map(String::as_str).collect()
    }

    #[test]
    fn snapshot_then_deltas_in_order() {
        let (mut a, mut v) = (Applier::default(), RegistryView::default());
        assert!(matches!(
            apply(&mut a, &mut v, frame(7, 5, 0, 2, &["a"])),
            Step::Nothing
        ));
        assert!(v.servers.is_empty(), "a partial snapshot is never visible");
        assert!(matches!(
            apply(&mut a, &mut v, frame(7, 5, 1, 2, &["b"])),
            Step::Apply(_)
        ));
        assert_eq!((v.epoch, v.revision, ids(&v)), (7, 5, vec!["a", "b"]));
        match apply(&mut a, &mut v, delta(7, 5, 8, &["c"], &["a"])) {
            Step::Apply(u) => {
                assert_eq!(u.applied.to_string(), "delta 7 5 8");
                assert_eq!(
                    u.affected.iter().map(String::as_str).collect::<Vec<_>>(),
                    vec!["a", "c"]
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ids(&v), vec!["b", "c"]);
    }

    #[test]
    fn duplicates_and_lower_revisions_are_ignored() {
        let (mut a, mut v) = (Applier::default(), RegistryView::default());
        apply(&mut a, &mut v, frame(7, 5, 0, 1, &["a"]));
        apply(&mut a, &mut v, delta(7, 5, 6, &["b"], &[]));
        assert!(matches!(
            apply(&mut a, &mut v, delta(7, 5, 6, &["b"], &[])),
            Step::Nothing
        ));
        assert!(matches!(
            apply(&mut a, &mut v, delta(7, 4, 5, &["x"], &[])),
            Step::Nothing
        ));
        assert_eq!(ids(&v), vec!["a", "b"]);
        // A complete snapshot below the applied revision in the same epoch is refused.
        assert!(matches!(
            apply(&mut a, &mut v, frame(7, 5, 0, 1, &[])),
            Step::Resync(_)
        ));
        assert_eq!(v.revision, 6);
    }

    #[test]
    fn a_gap_asks_for_a_resync() {
        let (mut a, mut v) = (Applier::default(), RegistryView::default());
        apply(&mut a, &mut v, frame(7, 5, 0, 1, &["a"]));
        assert!(matches!(
            apply(&mut a, &mut v, delta(7, 6, 7, &["b"], &[])),
            Step::Resync(_)
        ));
        assert_eq!(v.revision, 5);
        // A delta with no snapshot at all is a gap too.
        let (mut a, mut v) = (Applier::default(), RegistryView::default());
        assert!(matches!(
            apply(&mut a, &mut v, delta(7, 0, 1, &["b"], &[])),
            Step::Resync(_)
        ));
    }

    #[test]
    fn inconsistent_or_partial_snapshots_are_discarded() {
        let (mut a, mut v) = (Applier::default(), RegistryView::default());
        apply(&mut a, &mut v, frame(7, 5, 0, 3, &["a"]));
        assert!(matches!(
            apply(&mut a, &mut v, frame(7, 6, 1, 3, &["b"])),
            Step::Resync(_)
        ));
        assert!(v.servers.is_empty());
        assert!(matches!(
            apply(&mut a, &mut v, frame(7, 5, 2, 3, &["c"])),
            Step::Resync(_)
        ));
        assert!(matches!(
            apply(&mut a, &mut v, frame(7, 5, 1, 0, &[])),
            Step::Resync(_)
        ));
        apply(&mut a, &mut v, frame(7, 5, 0, 2, &["a"]));
        assert!(matches!(
            apply(&mut a, &mut v, delta(7, 0, 6, &[], &[])),
            Step::Resync(_)
        ));
        assert!(v.servers.is_empty());
    }

    #[test]
    fn a_new_epoch_replaces_everything() {
        let (mut a, mut v) = (Applier::default(), RegistryView::default());
        apply(&mut a, &mut v, frame(7, 50, 0, 1, &["a", "b"]));
        assert!(matches!(
            apply(&mut a, &mut v, frame(9, 2, 0, 1, &["c"])),
            Step::Apply(_)
        ));
        assert_eq!((v.epoch, v.revision, ids(&v)), (9, 2, vec!["c"]));
        assert!(matches!(
            apply(&mut a, &mut v, delta(7, 2, 3, &["x"], &[])),
            Step::Resync(_)
        ));
    }

    #[test]
    fn progress_is_only_a_heartbeat() {
        let (mut a, v) = (Applier::default(), RegistryView::default());
        let event = WatchEvent {
            event: Some(watch_event::Event::Progress(Progress {
                epoch: 3,
                revision: 9,
            })),
        };
        assert!(matches!(
            a.step(&v, event),
            Step::Progress {
                epoch: 3,
                revision: 9
            }
        ));
    }
}
