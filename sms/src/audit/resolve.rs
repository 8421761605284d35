//! Disputed seqs in the book: shown with every copy, and ended by an
//! admin keeping one (`sms audit resolve`). See `conflicts.rs` for why
//! both copies are kept.

use spear_proto::v1::AuditLine;

use super::conflicts::{offered_hash, Copy};
use super::{AuditBook, AuditError, Found, Stored};

/// What resolving a dispute did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// Copies dropped.
    pub dropped: u32,
    /// Whether the kept copy replaced the one the chain held.
    pub replaced: bool,
}

/// Which copy an admin keeps, among the held one (`held`, if the chain
/// still has it) and the others: the kept one's JSON when it is not the
/// held one, or why none is.
pub fn choose(
    node: &str,
    seq: u64,
    keep: &str,
    held: Option<&str>,
    copies: &[Copy],
) -> Result<(Option<String>, Resolved), AuditError> {
    if copies.is_empty() {
        return Err(AuditError::NotDisputed {
            node: node.to_string(),
            seq,
        });
    }
    let keep = keep.trim().to_ascii_lowercase();
    let held_hash = held.map(offered_hash);
    if held_hash.as_deref() == Some(keep.as_str()) {
        let dropped = copies.len() as u32;
        return Ok((
            None,
            Resolved {
                dropped,
                replaced: false,
            },
        ));
    }
    match copies.iter().find(|c| c.sha256 == keep) {
        Some(kept) => Ok((
            Some(kept.json.clone()),
            Resolved {
                dropped: (copies.len() - 1 + usize::from(held.is_some())) as u32,
                replaced: true,
            },
        )),
        None => Err(AuditError::NoSuchCopy {
            node: node.to_string(),
            seq,
            keep,
            copies: held_hash
                .into_iter()
                .chain(copies.iter().map(|c| c.sha256.clone()))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

impl AuditBook {
    /// `line` as a query answers it: alone, or, when its seq is disputed,
    /// as copy 0 followed by the other copies.
    pub(super) fn with_copies(&self, node: &str, line: AuditLine) -> Vec<Found> {
        let copies = self.conflicts.copies(node, line.seq);
        let found = |line, copy, sha256| Found {
            node: node.to_string(),
            line,
            copy,
            sha256,
        };
        if copies.is_empty() {
            return vec![found(line, 0, String::new())];
        }
        let seq = line.seq;
        let sha256 = offered_hash(&line.json);
        let others = copies
            .into_iter()
            .zip(1..)
            .map(|(c, copy)| found(AuditLine { seq, json: c.json }, copy, c.sha256));
        std::iter::once(found(line, 0, sha256))
            .chain(others)
            .collect()
    }

    /// Ends the dispute over `node`'s `seq`, keeping the copy whose
    /// SHA-256 is `keep`.
    pub fn resolve(&self, node: &str, seq: u64, keep: &str) -> Result<Resolved, AuditError> {
        let mut nodes = self.nodes.write();
        let held = nodes
            .get(node)
            .and_then(|chain| chain.get(&seq))
            .map(|s| s.json.as_str());
        let copies = self.conflicts.copies(node, seq);
        let (replacement, resolved) = choose(node, seq, keep, held, &copies)?;
        if let Some(json) = replacement {
            // Only now a chain for the node, if retention had emptied it:
            // a refused resolve leaves no trace in the book.
            let chain = nodes.entry(node.to_string()).or_default();
            if chain.insert(seq, Stored::new(json)).is_none() {
                self.kept.lock().total += 1;
            }
        }
        self.conflicts.take(node, seq);
        Ok(resolved)
    }
}
