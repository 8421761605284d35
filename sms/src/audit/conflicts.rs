//! Disputes: a record offered for a (node, seq) SMS already holds, with
//! other contents. SMS never replaces the held copy on its own, and never
//! drops the new one either: a peer that ships under a node's name before
//! the node does (it holds the node's credentials) would otherwise decide
//! what the trail says, the node's real record dropped. Both copies are
//! kept, `sms audit` shows them side by side, `verify` names the seq, and
//! an admin ends the dispute with `sms audit resolve`, keeping one copy.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Disputed seqs kept per node; past it, offered copies are only counted.
pub const MAX_SEQS_PER_NODE: usize = 1000;
/// Copies kept per seq beside the held one.
pub const MAX_COPIES_PER_SEQ: usize = 3;
/// Bytes of offered copies kept per node (a record is at most 16 KiB).
const MAX_BYTES_PER_NODE: usize = 4 * 1024 * 1024;
/// Copies kept per node on etcd, which does not weigh them: as many
/// records of the largest size as the byte bound holds.
pub const MAX_COPIES_PER_NODE: usize = MAX_BYTES_PER_NODE / super::MAX_RECORD;

/// The SHA-256 (hex) of a record's line, as disputes name copies.
pub fn offered_hash(json: &str) -> String {
    hex::encode(Sha256::digest(json.as_bytes()))
}

/// One copy of a record, other than the one the chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub sha256: String,
    pub json: String,
}

/// What became of an offered copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noted {
    /// Kept beside the held copy.
    Kept,
    /// The same copy was offered before.
    Again,
    /// Past the bounds: counted, not kept.
    Counted,
}

/// The disputes one SMS knows of (on etcd, loaded from there).
#[derive(Default)]
pub struct Conflicts {
    by_node: Mutex<BTreeMap<String, NodeConflicts>>,
}

#[derive(Default, Clone)]
struct NodeConflicts {
    seqs: BTreeMap<u64, Vec<Copy>>,
    bytes: usize,
    /// Copies offered past the bounds.
    uncounted: u64,
}

impl Conflicts {
    /// Keeps `json`, offered as `node`'s record `seq` other than the one
    /// held, within the bounds.
    pub fn note(&self, node: &str, seq: u64, json: &str) -> Noted {
        let copy = Copy {
            sha256: offered_hash(json),
            json: json.to_string(),
        };
        self.note_copy(node, seq, copy)
    }

    /// [`Conflicts::note`] of a copy whose hash is known (loading).
    pub fn note_copy(&self, node: &str, seq: u64, copy: Copy) -> Noted {
        let mut by_node = self.by_node.lock();
        let entry = by_node.entry(node.to_string()).or_default();
        let room_for_seq = entry.seqs.contains_key(&seq) || entry.seqs.len() < MAX_SEQS_PER_NODE;
        let copies = entry.seqs.get(&seq).map_or(0, Vec::len);
        if entry.seqs.get(&seq).is_some_and(|c| c.contains(&copy)) {
            return Noted::Again;
        }
        if !room_for_seq
            || copies >= MAX_COPIES_PER_SEQ
            || entry.bytes + copy.json.len() > MAX_BYTES_PER_NODE
        {
            entry.uncounted += 1;
            return Noted::Counted;
        }
        entry.bytes += copy.json.len();
        entry.seqs.entry(seq).or_default().push(copy);
        Noted::Kept
    }

    /// The copies kept for `node`'s `seq`, oldest first.
    pub fn copies(&self, node: &str, seq: u64) -> Vec<Copy> {
        let by_node = self.by_node.lock();
        by_node
            .get(node)
            .and_then(|n| n.seqs.get(&seq))
            .cloned()
            .unwrap_or_default()
    }

    /// Whether `node` has any disputed seq.
    pub fn any(&self, node: &str) -> bool {
        self.by_node.lock().contains_key(node)
    }

    /// Ends the dispute over `node`'s `seq`: its copies, now forgotten.
    pub fn take(&self, node: &str, seq: u64) -> Vec<Copy> {
        let mut by_node = self.by_node.lock();
        let Some(entry) = by_node.get_mut(node) else {
            return Vec::new();
        };
        let copies = entry.seqs.remove(&seq).unwrap_or_default();
        entry.bytes -= copies.iter().map(|c| c.json.len()).sum::<usize>();
        if entry.seqs.is_empty() && entry.uncounted == 0 {
            by_node.remove(node);
        }
        copies
    }

    /// The sentence `verify` gives for `node`, if it has disputes.
    pub fn sentence(&self, node: &str) -> Option<String> {
        let by_node = self.by_node.lock();
        let conflicts = by_node.get(node)?;
        let copies: usize = conflicts.seqs.values().map(Vec::len).sum();
        let first: Vec<String> = conflicts.seqs.keys().take(5).map(u64::to_string).collect();
        let more = if conflicts.seqs.len() > 5 {
            ", …"
        } else {
            ""
        };
        let counted = match conflicts.uncounted {
            0 => String::new(),
            n => format!(", and {n} more copies past what SMS keeps were counted only"),
        };
        Some(format!(
            "{} seq(s) were offered under this node's name with other contents than SMS holds (seq {}{more}; {copies} other copies kept{counted}). Another holder of this node's credentials shipped as it, or its log was rewritten: `sms audit --node {node}` shows both copies, compare with `spearlet audit-verify` on the node, and keep the true one with `sms audit resolve`",
            conflicts.seqs.len(),
            first.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disputes_keep_every_copy_within_bounds_and_are_named() {
        let conflicts = Conflicts::default();
        assert_eq!(conflicts.sentence("n1"), None);
        assert_eq!(conflicts.note("n1", 7, "a"), Noted::Kept);
        assert_eq!(conflicts.note("n1", 7, "a"), Noted::Again);
        assert_eq!(conflicts.note("n1", 7, "b"), Noted::Kept);
        assert_eq!(conflicts.note("n1", 7, "c"), Noted::Kept);
        assert_eq!(conflicts.note("n1", 7, "d"), Noted::Counted);
        let kept: Vec<String> = conflicts
            .copies("n1", 7)
            .into_iter()
            .map(|c| c.json)
            .collect();
        assert_eq!(kept, ["a", "b", "c"]);
        for seq in 100..(100 + MAX_SEQS_PER_NODE as u64) {
            conflicts.note("n1", seq, "x");
        }
        let said = conflicts.sentence("n1").unwrap_or_default();
        assert!(said.starts_with("1000 seq(s) were offered"), "{said}");
        assert!(said.contains("seq 7, 100, 101, 102, 103, …"), "{said}");
        assert!(said.contains("2 more copies past what SMS keeps"), "{said}");
        assert_eq!(conflicts.sentence("n2"), None);
    }

    #[test]
    fn taking_a_seq_ends_its_dispute_and_frees_its_bytes() {
        let conflicts = Conflicts::default();
        let big = "y".repeat(16 * 1024);
        let mut kept = 0;
        for seq in 0..400 {
            if conflicts.note("n1", seq, &big) == Noted::Kept {
                kept += 1;
            }
        }
        assert_eq!(kept, MAX_BYTES_PER_NODE / big.len());
        assert_eq!(conflicts.take("n1", 0).len(), 1);
        assert_eq!(conflicts.note("n1", 500, &big), Noted::Kept);
        assert!(conflicts.copies("n1", 0).is_empty());
    }
}
