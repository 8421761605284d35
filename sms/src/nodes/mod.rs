//! The nodes this SMS has heard from: what registry revision each applied,
//! its sync state and its per-server problems, so an operator can see
//! convergence per node.
//!
//! Nodes are held by the SMS they report to. A node that follows SMS
//! (`Registry.Follow`) is alive while its stream is open: its reports
//! come on that stream only when something in them changed, and
//! HTTP/2 and TCP keepalives find a stream whose node went away. A node
//! that ends its side of the stream has left, and is not alive from then
//! on; one whose stream broke stays alive for [`NODE_TTL`], as it may be
//! on its way back. A node that only heartbeats (`Nodes.Heartbeat`,
//! nodes from before the follow stream) is alive for [`NODE_TTL`] after
//! each heartbeat. With several SMS replicas an operator asks each
//! replica (or the one the node is connected to).

mod joins;
mod shared;

pub use joins::SpentJoins;
pub use shared::SharedNodes;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use spear_common::text;
use spear_proto::v1::{HeartbeatRequest, NodeStatus};
use tokio::sync::watch;

use crate::store::{Epoch, Revision};

pub use spear_proto::defaults::NODE_TTL;
use spear_proto::defaults::{
    MAX_HEARTBEAT_PROBLEMS, MAX_HEARTBEAT_SERVERS, MAX_HEARTBEAT_TEXT as MAX_TEXT,
};
/// A lost node is forgotten after this long.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Forgotten nodes are swept at most this often, not on every heartbeat.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// The most nodes one SMS tracks; beyond it the longest-dead node makes
/// room, and only live nodes can make a newcomer wait.
pub const MAX_NODES: usize = 100_000;
/// A node heartbeats every few seconds and after changes (bursts settle
/// for 50 ms); closer than this is refused, so a flood costs SMS little.
pub const MIN_HEARTBEAT_GAP: Duration = Duration::from_millis(20);

#[derive(Debug, Clone)]
struct NodeEntry {
    report: HeartbeatRequest,
    /// The last report, or the end of the node's last follow stream.
    last_seen: Instant,
    /// Follow streams of this node open now (a reconnect may overlap the
    /// old stream's end).
    streams: u32,
    /// The node ended its last follow stream itself: it left.
    left: bool,
}

impl NodeEntry {
    /// Alive: a follow stream open, or heard within [`NODE_TTL`] and not
    /// left.
    fn alive(&self, now: Instant) -> bool {
        self.streams > 0 || (!self.left && now.duration_since(self.last_seen) < NODE_TTL)
    }

    /// How long since SMS last heard of the node: nothing while its
    /// stream is open (the stream is the news).
    fn age(&self, now: Instant) -> Duration {
        match self.streams {
            0 => now.duration_since(self.last_seen),
            _ => Duration::ZERO,
        }
    }
}

/// How a report reached SMS: a node's own follow stream paces its reports
/// (one at a time, at most one per [`MIN_HEARTBEAT_GAP`]), so none is
/// dropped; separate heartbeat calls closer than the gap are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Heartbeat,
    Stream,
}

/// How a follow stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The node ended its side: it left.
    Left,
    /// Broken, refused or ended by SMS: the node may be on its way back.
    Broken,
}

/// Why a heartbeat was refused.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node_id is empty; start the spearlet with --node-id or let it choose one")]
    EmptyId,
    #[error("node_id: {0}")]
    BadId(spear_identity::IdentityError),
    #[error("SMS already tracks as many live nodes as it may; add an SMS replica")]
    TooMany,
    #[error("heartbeats for node '{0}' come faster than one per {MIN_HEARTBEAT_GAP:?}; this one was dropped")]
    TooFrequent(String),
}

/// The table of known nodes.
#[derive(Debug)]
pub struct NodeTable {
    nodes: RwLock<Nodes>,
    limit: usize,
    /// Counts accepted heartbeats: the console's live views follow it.
    changes: watch::Sender<u64>,
}

impl Default for NodeTable {
    fn default() -> Self {
        Self::with_limit(MAX_NODES)
    }
}

#[derive(Debug, Default)]
struct Nodes {
    by_id: BTreeMap<String, NodeEntry>,
    last_sweep: Option<Instant>,
}

impl NodeTable {
    /// A table of at most `limit` nodes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            nodes: RwLock::default(),
            limit,
            changes: watch::channel(0).0,
        }
    }

    /// Changes with every accepted heartbeat.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Records a heartbeat call, registering the node on its first one
    /// (the tests' shorthand for [`NodeTable::report`]).
    #[cfg(test)]
    pub fn heartbeat(&self, report: HeartbeatRequest) -> Result<(), NodeError> {
        self.heartbeat_at(report, Instant::now())
    }

    /// Records a report, registering the node on its first one.
    pub fn report(&self, report: HeartbeatRequest, via: Via) -> Result<(), NodeError> {
        self.report_at(report, Instant::now(), via)
    }

    /// A heartbeat call as of `now`.
    #[cfg(test)]
    fn heartbeat_at(&self, report: HeartbeatRequest, now: Instant) -> Result<(), NodeError> {
        self.report_at(report, now, Via::Heartbeat)
    }

    /// A follow stream of `node_id` (which has reported on it) is open.
    pub fn stream_opened(&self, node_id: &str) {
        if let Some(entry) = self.nodes.write().by_id.get_mut(node_id) {
            entry.streams += 1;
            entry.left = false;
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A follow stream of `node_id` that [`NodeTable::stream_opened`]
    /// counted ended.
    pub fn stream_ended(&self, node_id: &str, how: StreamEnd) {
        if let Some(entry) = self.nodes.write().by_id.get_mut(node_id) {
            entry.streams = entry.streams.saturating_sub(1);
            entry.last_seen = Instant::now();
            entry.left = how == StreamEnd::Left && entry.streams == 0;
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// [`NodeTable::report`] as of `now`.
    fn report_at(
        &self,
        mut report: HeartbeatRequest,
        now: Instant,
        via: Via,
    ) -> Result<(), NodeError> {
        if report.node_id.is_empty() {
            return Err(NodeError::EmptyId);
        }
        spear_identity::spiffe::check_name(&report.node_id).map_err(NodeError::BadId)?;
        text::truncate(&mut report.version, MAX_TEXT);
        text::truncate(&mut report.invoke_addr, MAX_TEXT);
        report.problems.truncate(MAX_HEARTBEAT_PROBLEMS);
        for problem in &mut report.problems {
            text::truncate(&mut problem.message, MAX_TEXT);
            text::truncate(&mut problem.server_id, MAX_TEXT);
        }
        report.servers.truncate(MAX_HEARTBEAT_SERVERS);
        for server in &mut report.servers {
            text::truncate(&mut server.server_id, MAX_TEXT);
            text::truncate(&mut server.state, MAX_TEXT);
            text::truncate(&mut server.protocol_version, MAX_TEXT);
            text::truncate(&mut server.sandbox, MAX_TEXT);
        }
        let mut guard = self.nodes.write();
        let table = &mut *guard;
        // A report says the node is here: it has not left (any more).
        let streams = match table.by_id.get(&report.node_id) {
            Some(entry) => {
                if via == Via::Heartbeat && now.duration_since(entry.last_seen) < MIN_HEARTBEAT_GAP
                {
                    return Err(NodeError::TooFrequent(report.node_id));
                }
                entry.streams
            }
            None => 0,
        };
        if table
            .last_sweep
            .is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY)
        {
            table
                .by_id
                .retain(|_, n| n.streams > 0 || now.duration_since(n.last_seen) < FORGET_AFTER);
            table.last_sweep = Some(now);
        }
        let nodes = &mut table.by_id;
        if nodes.len() >= self.limit && !nodes.contains_key(&report.node_id) {
            // Room for a newcomer comes from the longest-dead node only.
            let oldest = nodes
                .iter()
                .filter(|(_, n)| !n.alive(now))
                .min_by_key(|(_, n)| n.last_seen)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => {
                    nodes.remove(&id);
                }
                None => return Err(NodeError::TooMany),
            }
        }
        nodes.insert(
            report.node_id.clone(),
            NodeEntry {
                report,
                last_seen: now,
                streams,
                left: false,
            },
        );
        drop(guard);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    /// Every known node with its lag behind `(epoch, revision)`, without
    /// its servers' states (see [`NodeTable::node_status`]).
    pub fn status(&self, epoch: Epoch, revision: Revision) -> Vec<NodeStatus> {
        let nodes = self.nodes.read();
        nodes
            .by_id
            .values()
            .map(|n| Self::entry_status(n, epoch, revision, false))
            .collect()
    }

    /// How many nodes heartbeat within the TTL.
    pub fn alive_count(&self) -> usize {
        let now = Instant::now();
        let nodes = self.nodes.read();
        nodes.by_id.values().filter(|n| n.alive(now)).count()
    }

    /// One node's status with each of its servers' states.
    pub fn node_status(
        &self,
        node_id: &str,
        epoch: Epoch,
        revision: Revision,
    ) -> Option<NodeStatus> {
        let nodes = self.nodes.read();
        nodes
            .by_id
            .get(node_id)
            .map(|n| Self::entry_status(n, epoch, revision, true))
    }

    fn entry_status(n: &NodeEntry, epoch: Epoch, revision: Revision, servers: bool) -> NodeStatus {
        let now = Instant::now();
        {
            {
                let r = &n.report;
                let lag = if r.applied_epoch == epoch {
                    revision.saturating_sub(r.applied_revision)
                } else {
                    revision.max(1)
                };
                let age = n.age(now);
                NodeStatus {
                    node_id: r.node_id.clone(),
                    version: r.version.clone(),
                    applied_epoch: r.applied_epoch,
                    applied_revision: r.applied_revision,
                    lag,
                    sync_state: r.sync_state,
                    problems: r.problems.clone(),
                    last_seen_ms: age.as_millis() as u64,
                    alive: n.alive(now),
                    left: n.left,
                    invoke_addr: r.invoke_addr.clone(),
                    running: r.running,
                    draining: r.draining,
                    servers: if servers {
                        r.servers.clone()
                    } else {
                        Vec::new()
                    },
                    server_total: r.server_total,
                }
            }
        }
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
    /// Alive nodes that accept invocations (not draining), in id order.
    pub fn invocable(&self) -> Vec<Invocable> {
        let now = Instant::now();
        self.nodes
            .read()
            .by_id
            .values()
            .filter(|n| n.alive(now) && !n.report.invoke_addr.is_empty() && !n.report.draining)
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

    /// The registry position `node_id` last reported, if it has reported.
    pub fn applied(&self, node_id: &str) -> Option<(u64, u64)> {
        self.nodes
            .read()
            .by_id
            .get(node_id)
            .map(|n| (n.report.applied_epoch, n.report.applied_revision))
    }

    /// Whether SMS has heard from `node_id` recently enough to call it alive.
    pub fn is_known(&self, node_id: &str) -> bool {
        self.nodes.read().by_id.contains_key(node_id)
    }

    /// Whether `node_id` follows this SMS now, or heartbeated to it
    /// within [`NODE_TTL`].
    pub fn is_alive(&self, node_id: &str) -> bool {
        self.nodes
            .read()
            .by_id
            .get(node_id)
            .is_some_and(|n| n.alive(Instant::now()))
    }
}

#[cfg(test)]
mod tests;
