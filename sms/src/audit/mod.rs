//! The audit trail, SMS's side (docs/trust.md). Entry point: [`AuditBook`].
//!
//! Nodes ship their records at least once; the book keeps each
//! (node, seq) once, exactly as the node wrote it (so `verify` checks the
//! node's own hashes), answers `sms audit`'s filters from a small index
//! of each record, and forgets records past the retention or the cap,
//! oldest first. Records are kept in this SMS's memory; the node's state
//! dir holds the durable copy (`spearlet audit verify`).

mod admin;
mod conflicts;
mod etcd;
pub mod heads;
mod own;
mod resolve;
mod store;
mod usage;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use parking_lot::RwLock;
use spear_common::clock::now_ms;
use spear_proto::audit::{ChainCheck, Outcome, Record};
use spear_proto::v1::{AuditLine, ChainReport, QueryAuditRequest};

pub use admin::{is_sms_chain, AdminAudit};
pub use etcd::EtcdAudit;
pub use resolve::Resolved;
pub use store::AuditStore;

/// Bytes of one record.
pub const MAX_RECORD: usize = 16 * 1024;
/// Records one shipment may carry.
pub const MAX_SHIPMENT: usize = 5_000;
/// Records `query` answers at most at once.
pub const MAX_QUERY: usize = 10_000;

/// Why a shipment is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    #[error("a shipment may carry at most {MAX_SHIPMENT} records; this one has {0}")]
    TooMany(usize),
    #[error("record {seq} is {len} bytes, over the {MAX_RECORD} a record may be")]
    TooLarge { seq: u64, len: usize },
    #[error("record {seq} is not an audit record: its JSON does not parse as one")]
    NotARecord { seq: u64 },
    #[error("record {seq} names node '{named}', but the shipment comes from node '{caller}': a node ships only its own records")]
    OtherNode {
        seq: u64,
        named: String,
        caller: String,
    },
    #[error("record {seq} says it is record {says}; a record is shipped at its own seq")]
    WrongSeq { seq: u64, says: u64 },
    #[error("seq {seq} of node '{node}' is not disputed: SMS holds one copy of it (`sms audit verify` names disputed seqs)")]
    NotDisputed { node: String, seq: u64 },
    #[error("no copy of node '{node}''s seq {seq} has SHA-256 {keep}; its copies are {copies} (`sms audit --node {node}` shows them)")]
    NoSuchCopy {
        node: String,
        seq: u64,
        keep: String,
        copies: String,
    },
    #[error("the audit store is unavailable: {0}")]
    Unavailable(String),
}

use own::check_shipment;

/// How long and how much the book keeps.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub max_age: Duration,
    pub max_records: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_records: 1_000_000,
        }
    }
}

/// What a filter looks at, read once when a record arrives.
struct Stored {
    json: String,
    time_ms: u64,
    task: String,
    server: String,
    tool: String,
    outcome: Option<Outcome>,
    /// A `reset` record: the node lost its log and went on from SMS's copy.
    reset: bool,
}

impl Stored {
    fn new(json: String) -> Stored {
        // A record that does not parse is kept as it came: `verify` names it.
        let record: Option<Record> = serde_json::from_str(&json).ok();
        let outcome = record.as_ref().map(|r| r.outcome);
        let record = record.unwrap_or_default();
        Stored {
            reset: record.kind == spear_proto::audit::Kind::Reset,
            time_ms: record.time_ms,
            task: record.task,
            server: record.server,
            tool: record.tool,
            outcome,
            json,
        }
    }
}

/// Every node's records this SMS holds.
#[derive(Default)]
pub struct AuditBook {
    nodes: RwLock<BTreeMap<String, BTreeMap<u64, Stored>>>,
    retention: Retention,
    /// Records held in all, and when every chain was last swept for age;
    /// changed only under `nodes`' write lock.
    kept: parking_lot::Mutex<Kept>,
    /// Copies offered for a held (node, seq) with other contents.
    pub(crate) conflicts: conflicts::Conflicts,
}

#[derive(Default)]
struct Kept {
    total: usize,
    swept_at: Option<std::time::Instant>,
}

/// How often every chain is swept for records past the retention (the
/// shipping node's own chain is at each of its shipments).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What one shipment did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shipped {
    pub stored: u64,
    pub duplicates: u64,
    /// Records that differ from the copy held for their seq: kept beside
    /// it as a dispute, named by `verify` until an admin resolves it.
    pub conflicts: u64,
    /// The records new to SMS (for watchers and the log export).
    pub new: Vec<AuditLine>,
}

/// One record a query answers, and which copy of its seq it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub node: String,
    pub line: AuditLine,
    /// 0 for the copy in the chain; 1.. for the other copies of a
    /// disputed seq, in the order they came.
    pub copy: u32,
    /// The copy's SHA-256 when its seq is disputed; empty otherwise.
    pub sha256: String,
}

/// Sends `record` of `node` to the operator's log pipeline (when OTLP is
/// set up).
pub fn export(node: &str, record: &AuditLine) {
    // No parsing on the shipment path unless there is somewhere to send it.
    if !spear_common::audit_export::enabled() {
        return;
    }
    let parsed: Record = serde_json::from_str(&record.json).unwrap_or_default();
    let kind = serde_json::to_value(parsed.kind).unwrap_or_default();
    let labels = spear_common::audit_export::Labels {
        node,
        seq: record.seq,
        kind: kind.as_str().unwrap_or_default(),
        outcome: parsed.outcome.name(),
    };
    spear_common::audit_export::export(labels, &record.json);
}

impl AuditBook {
    pub fn new(retention: Retention) -> Self {
        Self {
            nodes: RwLock::default(),
            retention,
            kept: Default::default(),
            conflicts: Default::default(),
        }
    }

    /// Keeps `node`'s records it does not have yet.
    pub fn ship(&self, node: &str, records: Vec<AuditLine>) -> Result<Shipped, AuditError> {
        check_shipment(node, &records)?;
        let mut shipped = Shipped::default();
        let mut nodes = self.nodes.write();
        let chain = nodes.entry(node.to_string()).or_default();
        for line in records {
            match chain.entry(line.seq) {
                std::collections::btree_map::Entry::Occupied(held)
                    if held.get().json == line.json =>
                {
                    shipped.duplicates += 1
                }
                std::collections::btree_map::Entry::Occupied(_) => {
                    match self.conflicts.note(node, line.seq, &line.json) {
                        conflicts::Noted::Again => shipped.duplicates += 1,
                        noted => {
                            tracing::warn!(node_id = node, seq = line.seq, ?noted, "audit: a record differs from the one held for its seq; both copies are kept until an admin resolves it");
                            shipped.conflicts += 1;
                        }
                    }
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(Stored::new(line.json.clone()));
                    shipped.stored += 1;
                    shipped.new.push(line);
                }
            }
        }
        self.retire(&mut nodes, node, shipped.stored as usize);
        Ok(shipped)
    }

    /// Keeps one record as it is, without checks (loading from etcd).
    fn keep(&self, node: &str, line: AuditLine) {
        let mut nodes = self.nodes.write();
        let chain = nodes.entry(node.to_string()).or_default();
        if chain.insert(line.seq, Stored::new(line.json)).is_none() {
            self.kept.lock().total += 1;
        }
    }

    /// The last record kept of `node`.
    pub fn last_of(&self, node: &str) -> Option<AuditLine> {
        let nodes = self.nodes.read();
        let (seq, stored) = nodes.get(node)?.last_key_value()?;
        Some(AuditLine {
            seq: *seq,
            json: stored.json.clone(),
        })
    }

    /// Drops records older than the retention (`shipping`'s chain now,
    /// every chain once a minute), then, past the cap, the oldest across
    /// nodes down to 99 % of it at once, so the cost of ordering the
    /// chains is paid once per 1 % of the cap, not per shipment. A chain
    /// then starts later; `verify` anchors there.
    fn retire(
        &self,
        nodes: &mut BTreeMap<String, BTreeMap<u64, Stored>>,
        shipping: &str,
        added: usize,
    ) {
        let mut kept = self.kept.lock();
        kept.total += added;
        let oldest = now_ms().saturating_sub(self.retention.max_age.as_millis() as u64);
        let mut removed = 0;
        let mut drop_old = |chain: &mut BTreeMap<u64, Stored>| {
            while chain
                .first_key_value()
                .is_some_and(|(_, r)| r.time_ms < oldest)
            {
                chain.pop_first();
                removed += 1;
            }
        };
        if kept.swept_at.is_some_and(|at| at.elapsed() < SWEEP_EVERY) {
            if let Some(chain) = nodes.get_mut(shipping) {
                drop_old(chain);
            }
        } else {
            nodes.values_mut().for_each(drop_old);
            kept.swept_at = Some(std::time::Instant::now());
        }
        kept.total -= removed;
        let cap = self.retention.max_records;
        if kept.total > cap {
            let target = cap - cap / 100;
            let mut by_age: BinaryHeap<Reverse<(u64, String)>> = nodes
                .iter()
                .filter_map(|(node, c)| {
                    c.first_key_value()
                        .map(|(_, r)| Reverse((r.time_ms, node.clone())))
                })
                .collect();
            while kept.total > target {
                let Some(Reverse((_, node))) = by_age.pop() else {
                    break;
                };
                let Some(chain) = nodes.get_mut(&node) else {
                    continue;
                };
                chain.pop_first();
                kept.total -= 1;
                removed += 1;
                if let Some((_, next)) = chain.first_key_value() {
                    by_age.push(Reverse((next.time_ms, node)));
                }
            }
        }
        if removed > 0 {
            nodes.retain(|_, chain| !chain.is_empty());
        }
    }

    /// The records matching `filter`, oldest first per node, with the
    /// node of each, and how many matched past `limit`.
    pub fn query(&self, filter: &QueryAuditRequest) -> (Vec<Found>, u64) {
        let limit = match filter.limit as usize {
            0 => MAX_QUERY,
            n => n.min(MAX_QUERY),
        };
        let wanted_outcome = Outcome::parse(&filter.outcome);
        let matches = |s: &Stored| {
            (filter.task_id.is_empty() || s.task == filter.task_id)
                && (filter.server_id.is_empty() || s.server == filter.server_id)
                && (filter.tool.is_empty() || s.tool == filter.tool)
                && (filter.outcome.is_empty() || s.outcome == wanted_outcome)
                && s.time_ms >= filter.since_ms
        };
        let nodes = self.nodes.read();
        let mut found = Vec::new();
        let mut left_out = 0;
        for (node, chain) in nodes.iter() {
            if !filter.node_id.is_empty() && node != &filter.node_id {
                continue;
            }
            let disputed = self.conflicts.any(node);
            for (seq, stored) in chain.iter().filter(|(_, s)| matches(s)) {
                if found.len() >= limit {
                    left_out += 1;
                    continue;
                }
                let line = AuditLine {
                    seq: *seq,
                    json: stored.json.clone(),
                };
                match disputed {
                    true => found.extend(self.with_copies(node, line)),
                    false => found.push(Found {
                        node: node.clone(),
                        line,
                        copy: 0,
                        sha256: String::new(),
                    }),
                }
            }
        }
        (found, left_out)
    }

    /// What the records `filter` matches add up to (`sms usage`).
    pub fn usage(&self, filter: &spear_proto::v1::UsageRequest) -> spear_proto::v1::UsageResponse {
        let mut totals = usage::Totals::default();
        let nodes = self.nodes.read();
        for (node, chain) in nodes.iter() {
            let candidates = chain.values().filter(|s| {
                s.time_ms >= filter.since_ms
                    && (filter.task_id.is_empty() || s.task == filter.task_id)
            });
            for stored in candidates {
                if let Ok(record) = serde_json::from_str::<Record>(&stored.json) {
                    totals.add(filter, node, &record);
                }
            }
        }
        totals.into_response()
    }

    /// Checks every node's chain; each report names its first problem.
    pub fn verify(&self) -> Vec<ChainReport> {
        let nodes = self.nodes.read();
        nodes
            .iter()
            .map(|(node, chain)| {
                let mut check = ChainCheck::new(node);
                let mut problem = String::new();
                for (seq, stored) in chain {
                    if let Err(broken) = check.push(*seq, &stored.json) {
                        problem = broken.to_string();
                        break;
                    }
                }
                if let Some(conflicts) = self.conflicts.sentence(node) {
                    problem = match problem.is_empty() {
                        true => conflicts,
                        false => format!("{problem}; {conflicts}"),
                    };
                }
                ChainReport {
                    node_id: node.clone(),
                    first_seq: chain.first_key_value().map_or(0, |(s, _)| *s),
                    last_seq: chain.last_key_value().map_or(0, |(s, _)| *s),
                    records: chain.len() as u64,
                    problem,
                    resets: chain
                        .iter()
                        .filter(|(_, stored)| stored.reset)
                        .map(|(seq, _)| *seq)
                        .collect(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod book_tests;
