//! What the hub keeps, encoded once and shared by every stream: each
//! server's record ([`Entry`]), each revision's change ([`DeltaFrame`]),
//! a revision's snapshot ([`SnapshotFrames`]).
//!
//! Servers scoped to some nodes (`"nodes"`) reach a node they are not for
//! as a stub (its id and scope, nothing of how to run it). Frames stay
//! encoded once for every node; a change that upserts a scoped server, and
//! a snapshot while one exists, are encoded once more for each combination
//! of scopes nodes are outside of (usually one: "not a GPU node"), and
//! shared by the nodes in it (`ScopedSnapshots`, kept by the hub).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use spear_proto::frame::EncodedEvent;
use spear_proto::scope::{in_scope, stub};
use spear_proto::v1::ServerRecord;

use super::encode;
use crate::store::{Committed, Epoch, Revision};

/// One registry revision, encoded once, shared by every stream.
#[derive(Debug)]
pub(super) struct DeltaFrame {
    pub revision: Revision,
    pub event: EncodedEvent,
    /// The change itself when it upserts a server scoped to some nodes:
    /// the others get it with that server as a stub, encoded once for
    /// each combination of scopes they are outside of.
    pub scoped: Option<Committed>,
    pub masked: Mutex<HashMap<Vec<bool>, EncodedEvent>>,
}

/// The snapshot of one revision, encoded once, shared by every stream.
#[derive(Debug)]
pub(super) struct SnapshotFrames {
    pub epoch: Epoch,
    pub revision: Revision,
    pub frames: Vec<EncodedEvent>,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub record: ServerRecord,
    pub encoded: Bytes,
    /// For a server scoped to some nodes: its stub, encoded, for the rest.
    pub stub: Option<Bytes>,
}

/// Snapshots of one revision for nodes outside some scopes, keyed by which
/// of the scoped servers (in registry order) each node is for.
#[derive(Default)]
pub(super) struct ScopedSnapshots {
    pub at: (Epoch, Revision),
    pub by_scope: HashMap<Vec<bool>, Arc<SnapshotFrames>>,
}

impl DeltaFrame {
    /// The frame as `node_id` receives it.
    pub fn for_node(&self, epoch: Epoch, node_id: &str) -> EncodedEvent {
        let Some(committed) = &self.scoped else {
            return self.event.clone();
        };
        let scope: Vec<bool> = committed
            .upserts
            .iter()
            .filter_map(|r| r.spec.as_ref())
            .filter(|spec| !spec.nodes.is_empty())
            .map(|spec| in_scope(spec, node_id))
            .collect();
        if scope.iter().all(|&for_it| for_it) {
            return self.event.clone();
        }
        let mut masked = self.masked.lock();
        if let Some(event) = masked.get(&scope) {
            return event.clone();
        }
        let mut change = committed.clone();
        for record in &mut change.upserts {
            if let Some(spec) = record.spec.as_mut().filter(|s| !in_scope(s, node_id)) {
                *spec = stub(spec);
            }
        }
        let event = encode::delta_frame(epoch, &change);
        masked.insert(scope, event.clone());
        event
    }
}

/// Whether `committed` upserts a server scoped to some nodes.
pub(super) fn is_scoped(committed: &Committed) -> bool {
    committed
        .upserts
        .iter()
        .any(|r| r.spec.as_ref().is_some_and(|s| !s.nodes.is_empty()))
}

impl Entry {
    pub(super) fn new(record: ServerRecord) -> Self {
        let stub = record
            .spec
            .as_ref()
            .filter(|s| !s.nodes.is_empty())
            .map(|spec| {
                encode::encode_record(&ServerRecord {
                    spec: Some(stub(spec)),
                    ..record.clone()
                })
            });
        Self {
            encoded: encode::encode_record(&record),
            stub,
            record,
        }
    }

    /// The record as `node_id` receives it.
    pub(super) fn for_node(&self, node_id: &str) -> &Bytes {
        match (&self.stub, &self.record.spec) {
            (Some(stub), Some(spec)) if !in_scope(spec, node_id) => stub,
            _ => &self.encoded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use spear_proto::v1::ServerSpec;

    fn record(id: &str, nodes: &[&str]) -> ServerRecord {
        ServerRecord {
            spec: Some(ServerSpec {
                id: id.into(),
                command: "/opt/secret-path/server".into(),
                nodes: nodes.iter().map(|n| n.to_string()).collect(),
                enabled: true,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_scoped_server_reaches_other_nodes_as_a_stub() {
        let entry = Entry::new(record("gpu", &["gpu-*"]));
        let seen = |node: &str| ServerRecord::decode(entry.for_node(node).clone()).unwrap();
        assert_eq!(
            seen("gpu-1").spec.unwrap().command,
            "/opt/secret-path/server"
        );
        let stubbed = seen("cpu-1").spec.unwrap();
        assert_eq!(
            (
                stubbed.id.as_str(),
                stubbed.command.as_str(),
                stubbed.enabled
            ),
            ("gpu", "", false)
        );
        // An unscoped server is one encoding for all.
        assert!(Entry::new(record("fs", &[])).stub.is_none());

        let committed = Committed {
            revision: 2,
            prev_revision: 1,
            upserts: vec![record("gpu", &["gpu-*"]), record("fs", &[])],
            deletes: vec![],
        };
        let frame = DeltaFrame {
            revision: 2,
            event: encode::delta_frame(7, &committed),
            scoped: is_scoped(&committed).then(|| committed.clone()),
            masked: Default::default(),
        };
        let text = |event: EncodedEvent| format!("{:?}", event);
        assert_eq!(text(frame.for_node(7, "gpu-1")), text(frame.event.clone()));
        let other = frame.for_node(7, "cpu-1");
        assert_ne!(text(other.clone()), text(frame.event.clone()));
        assert!(other.len() < frame.event.len());
        // Encoded once for every node outside the same scopes.
        assert_eq!(text(frame.for_node(7, "cpu-2")), text(other));
        assert_eq!(frame.masked.lock().len(), 1);
    }
}
