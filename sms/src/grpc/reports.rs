//! What a node tells SMS about itself, however it arrives: a report on
//! its follow stream (`Registry.Follow`) or a heartbeat call
//! (`Nodes.Heartbeat`, nodes from before the follow stream). [`Reports`]
//! is the one place a report lands: the node table, the audit chain
//! heads, the change timing, and the directory replicas share in etcd.
//! [`Presence`] holds a follow stream's place in the table and the
//! directory while the stream is open.

use std::sync::Arc;

use spear_proto::v1::HeartbeatRequest;

use crate::audit::heads::Heads;
use crate::nodes::{NodeError, NodeTable, SharedNodes, StreamEnd, Via};
use crate::watch::Hub;

/// Where node reports land; shared by the Nodes and Registry services.
pub struct Reports {
    nodes: Arc<NodeTable>,
    /// Invocable nodes, for the other SMS replicas (etcd).
    shared: Option<Arc<SharedNodes>>,
    /// Where the nodes' audit chains stand, as they report it.
    heads: Arc<Heads>,
    /// Times each change's way to the nodes.
    hub: Arc<Hub>,
}

impl Reports {
    pub fn new(
        nodes: Arc<NodeTable>,
        shared: Option<Arc<SharedNodes>>,
        heads: Arc<Heads>,
        hub: Arc<Hub>,
    ) -> Reports {
        Reports {
            nodes,
            shared,
            heads,
            hub,
        }
    }

    /// Takes one report of a node whose identity the caller checked.
    pub fn take(&self, report: HeartbeatRequest, via: Via) -> Result<(), NodeError> {
        let node_id = report.node_id.clone();
        self.heads.note(&node_id, report.audit_head_seq);
        let before = self.nodes.applied(&node_id);
        let now = (report.applied_epoch, report.applied_revision);
        let published = self.shared.as_ref().map(|_| report.clone());
        self.nodes.report(report, via)?;
        // A node reports within 50 ms of applying a change: the time since
        // SMS applied it is the change's way to this node.
        if let Some((epoch, revision)) = before {
            if epoch == now.0 && epoch == self.hub.position().0 {
                self.hub.node_caught_up(revision, now.1);
            }
        }
        if let (Some(shared), Some(report)) = (&self.shared, published) {
            // Other replicas route to this node once it is written; the
            // node's own SMS serves it either way.
            shared.publish_soon(&report);
        }
        Ok(())
    }

    /// `node_id`'s follow stream is open (its first report was taken):
    /// the node is alive until the returned presence ends.
    pub fn present(self: &Arc<Self>, node_id: &str) -> Presence {
        self.nodes.stream_opened(node_id);
        if let Some(shared) = &self.shared {
            shared.stream_opened(node_id);
        }
        Presence {
            reports: Arc::clone(self),
            node_id: node_id.to_string(),
            end: StreamEnd::Broken,
        }
    }
}

/// A node's open follow stream, as the node table and the shared
/// directory count it. Dropped as [`StreamEnd::Broken`] unless
/// [`Presence::left`] said otherwise.
pub struct Presence {
    reports: Arc<Reports>,
    node_id: String,
    end: StreamEnd,
}

impl Presence {
    /// The node ended its side of the stream: it left.
    pub fn left(mut self) {
        self.end = StreamEnd::Left;
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        let reports = &self.reports;
        reports.nodes.stream_ended(&self.node_id, self.end);
        if let Some(shared) = &reports.shared {
            shared.stream_ended(&self.node_id, self.end == StreamEnd::Left);
        }
    }
}
