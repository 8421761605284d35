//! Conflicts: a record offered for a (node, seq) SMS already holds with
//! other contents. SMS keeps the first copy and never replaces it, so a
//! peer that ships under a node's name before the node does (it holds the
//! join credentials) would otherwise rewrite that node's trail in silence:
//! the node's real records dropped as duplicates, `verify` satisfied.
//! Each conflict is kept here and named by `verify`, which then fails.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Conflicting seqs kept per node; beyond it they are counted.
const MAX_PER_NODE: usize = 1000;

/// The conflicts one SMS knows of (on etcd, loaded from there).
#[derive(Default)]
pub struct Conflicts {
    by_node: Mutex<BTreeMap<String, NodeConflicts>>,
}

#[derive(Default, Clone)]
struct NodeConflicts {
    /// seq → the offered copy's SHA-256 (its contents are a peer's, not
    /// kept).
    seqs: BTreeMap<u64, String>,
    uncounted: u64,
}

/// The SHA-256 of an offered record, as conflicts keep it.
pub fn offered_hash(json: &str) -> String {
    hex::encode(Sha256::digest(json.as_bytes()))
}

impl Conflicts {
    /// Notes that `node`'s record `seq` was offered as `hash`, other than
    /// the one held.
    pub fn note(&self, node: &str, seq: u64, hash: String) {
        let mut by_node = self.by_node.lock();
        let entry = by_node.entry(node.to_string()).or_default();
        if entry.seqs.contains_key(&seq) || entry.seqs.len() < MAX_PER_NODE {
            entry.seqs.insert(seq, hash);
        } else {
            entry.uncounted += 1;
        }
    }

    /// The sentence `verify` gives for `node`, if it has conflicts.
    pub fn sentence(&self, node: &str) -> Option<String> {
        let by_node = self.by_node.lock();
        let conflicts = by_node.get(node)?;
        let count = conflicts.seqs.len() as u64 + conflicts.uncounted;
        let first: Vec<String> = conflicts.seqs.keys().take(5).map(u64::to_string).collect();
        let more = if conflicts.seqs.len() > 5 {
            ", …"
        } else {
            ""
        };
        Some(format!(
            "{count} record(s) offered under this node's name differ from the ones SMS holds (seq {}{more}); SMS kept the first copies. Another holder of the join credentials shipped as this node, or the node's log was rewritten: compare with `spearlet audit-verify` on the node",
            first.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_named_and_bounded() {
        let conflicts = Conflicts::default();
        assert_eq!(conflicts.sentence("n1"), None);
        for seq in 0..(MAX_PER_NODE as u64 + 3) {
            conflicts.note("n1", seq, offered_hash("x"));
        }
        let said = conflicts.sentence("n1").unwrap_or_default();
        assert!(said.starts_with("1003 record(s) offered"), "{said}");
        assert!(said.contains("seq 0, 1, 2, 3, 4, …"), "{said}");
        assert_eq!(conflicts.sentence("n2"), None);
    }
}
