//! The nodes this SMS has heard from: what registry revision each applied,
//! its sync state and its per-server problems, so an operator can see
//! convergence per node.
//!
//! Nodes are held by the SMS they heartbeat to. With several SMS replicas an
//! operator asks each replica (or the one the node is connected to).

mod shared;

pub use shared::SharedNodes;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use spear_common::text;
use spear_proto::v1::{HeartbeatRequest, NodeStatus};

use crate::store::{Epoch, Revision};

pub use spear_proto::defaults::NODE_TTL;
/// A lost node is forgotten after this long.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Bounds on what one node may make SMS hold.
const MAX_NODES: usize = 100_000;
const MAX_PROBLEMS_PER_NODE: usize = 256;
const MAX_TEXT: usize = 1024;

#[derive(Debug, Clone)]
struct NodeEntry {
    report: HeartbeatRequest,
    last_seen: Instant,
}

/// Why a heartbeat was refused.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node_id is empty; start the spearlet with --node-id or let it choose one")]
    EmptyId,
    #[error("node_id is longer than {MAX_TEXT} bytes")]
    IdTooLong,
    #[error("SMS already tracks {MAX_NODES} nodes; remove lost nodes or add an SMS replica")]
    TooMany,
}

/// The table of known nodes.
#[derive(Debug, Default)]
pub struct NodeTable {
    nodes: RwLock<BTreeMap<String, NodeEntry>>,
}

impl NodeTable {
    /// Records a heartbeat, registering the node on its first one.
    pub fn heartbeat(&self, mut report: HeartbeatRequest) -> Result<(), NodeError> {
        if report.node_id.is_empty() {
            return Err(NodeError::EmptyId);
        }
        if report.node_id.len() > MAX_TEXT {
            return Err(NodeError::IdTooLong);
        }
        text::truncate(&mut report.version, MAX_TEXT);
        text::truncate(&mut report.invoke_addr, MAX_TEXT);
        report.problems.truncate(MAX_PROBLEMS_PER_NODE);
        for problem in &mut report.problems {
            text::truncate(&mut problem.message, MAX_TEXT);
            text::truncate(&mut problem.server_id, MAX_TEXT);
        }
        let now = Instant::now();
        let mut nodes = self.nodes.write();
        nodes.retain(|_, n| now.duration_since(n.last_seen) < FORGET_AFTER);
        if nodes.len() >= MAX_NODES && !nodes.contains_key(&report.node_id) {
            return Err(NodeError::TooMany);
        }
        nodes.insert(
            report.node_id.clone(),
            NodeEntry {
                report,
                last_seen: now,
            },
        );
        Ok(())
    }

    /// Every known node with its lag behind `(epoch, revision)`.
    pub fn status(&self, epoch: Epoch, revision: Revision) -> Vec<NodeStatus> {
        let now = Instant::now();
        self.nodes
            .read()
            .values()
            .map(|n| {
                let r = &n.report;
                let lag = if r.applied_epoch == epoch {
                    revision.saturating_sub(r.applied_revision)
                } else {
                    revision.max(1)
                };
                let age = now.duration_since(n.last_seen);
                NodeStatus {
                    node_id: r.node_id.clone(),
                    version: r.version.clone(),
                    applied_epoch: r.applied_epoch,
                    applied_revision: r.applied_revision,
                    lag,
                    sync_state: r.sync_state,
                    problems: r.problems.clone(),
                    last_seen_ms: age.as_millis() as u64,
                    alive: age < NODE_TTL,
                    invoke_addr: r.invoke_addr.clone(),
                    running: r.running,
                }
            })
            .collect()
    }
}

/// A node that can take an invocation now.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocable {
    pub node_id: String,
    pub addr: String,
    /// Applied the registry and follows SMS (rather than serving a stale copy).
    pub synced: bool,
    /// Guest runs in progress, as of its last heartbeat.
    pub running: u32,
    /// Servers the node reports as unusable.
    pub failed_servers: Vec<String>,
}

impl NodeTable {
    /// Alive nodes that accept invocations, in id order.
    pub fn invocable(&self) -> Vec<Invocable> {
        let now = Instant::now();
        self.nodes
            .read()
            .values()
            .filter(|n| {
                now.duration_since(n.last_seen) < NODE_TTL && !n.report.invoke_addr.is_empty()
            })
            .map(|n| Invocable {
                node_id: n.report.node_id.clone(),
                addr: n.report.invoke_addr.clone(),
                synced: n.report.sync_state == spear_proto::v1::SyncState::Synced as i32,
                running: n.report.running,
                failed_servers: n
                    .report
                    .problems
                    .iter()
                    .filter(|p| p.failed)
                    .map(|p| p.server_id.clone())
                    .collect(),
            })
            .collect()
    }

    /// Whether SMS has heard from `node_id` recently enough to call it alive.
    pub fn is_known(&self, node_id: &str) -> bool {
        self.nodes.read().contains_key(node_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(id: &str, epoch: u64, rev: u64) -> HeartbeatRequest {
        HeartbeatRequest {
            node_id: id.into(),
            applied_epoch: epoch,
            applied_revision: rev,
            ..Default::default()
        }
    }

    #[test]
    fn lag_is_revisions_behind_in_the_same_epoch() {
        let table = NodeTable::default();
        table.heartbeat(hb("a", 7, 10)).unwrap();
        table.heartbeat(hb("b", 7, 12)).unwrap();
        table.heartbeat(hb("c", 3, 12)).unwrap();
        let status = table.status(7, 12);
        let lag: Vec<(String, u64)> = status.iter().map(|n| (n.node_id.clone(), n.lag)).collect();
        assert_eq!(
            lag,
            vec![("a".into(), 2), ("b".into(), 0), ("c".into(), 12)]
        );
        assert!(status.iter().all(|n| n.alive));
    }

    #[test]
    fn empty_node_id_is_refused() {
        assert!(matches!(
            NodeTable::default().heartbeat(hb("", 1, 1)),
            Err(NodeError::EmptyId)
        ));
    }
}
