//! Chain heads: the last audit seq each node says (in its heartbeat) it
//! has on disk. SMS keeps the highest one it was told, so a tail that
//! never arrives (the node's log cut before shipping, or shipping failing
//! for good) is named by `verify` once it has been missing longer than
//! [`GRACE`], while records merely on their way are not. Kept in this
//! replica's memory: the replica the node heartbeats to names it.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// How long a reported record may be on its way before it is missing.
pub const GRACE: Duration = Duration::from_secs(30);
/// Nodes remembered at once (heartbeats are capped by the node table).
const MAX_NODES: usize = 100_000;

#[derive(Default)]
pub struct Heads {
    by_node: Mutex<HashMap<String, (u64, Instant)>>,
}

impl Heads {
    /// `node` says its chain reaches `seq`.
    pub fn note(&self, node: &str, seq: u64) {
        if seq == 0 {
            return;
        }
        let mut by_node = self.by_node.lock();
        if by_node.len() >= MAX_NODES && !by_node.contains_key(node) {
            return;
        }
        let entry = by_node
            .entry(node.to_string())
            .or_insert((seq, Instant::now()));
        if seq > entry.0 {
            *entry = (seq, Instant::now());
        }
    }

    /// Why `node`'s chain at SMS (ending at `held_last`) lacks a tail the
    /// node reported, if it does.
    pub fn missing(&self, node: &str, held_last: u64) -> Option<String> {
        let by_node = self.by_node.lock();
        let (head, since) = by_node.get(node)?;
        let waited = since.elapsed();
        (*head > held_last && waited >= GRACE).then(|| {
            format!(
                "records {} to {head} never reached SMS, though the node reported writing them {} s ago: its log was cut before they were shipped, its shipping fails (see the node's log), or this SMS runs without etcd and lost its copy in a restart",
                held_last + 1,
                waited.as_secs()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_tail_reported_and_never_received_is_named_after_the_grace() {
        let heads = Heads::default();
        heads.note("n1", 12);
        // On its way: not named yet.
        assert_eq!(heads.missing("n1", 9), None);
        tokio::time::advance(GRACE).await;
        let said = heads.missing("n1", 9).unwrap_or_default();
        assert!(
            said.starts_with("records 10 to 12 never reached SMS"),
            "{said}"
        );
        // A node restarted with a shorter log does not lower the head.
        heads.note("n1", 10);
        assert!(heads.missing("n1", 10).is_some());
        // Everything arrived: nothing to name.
        assert_eq!(heads.missing("n1", 12), None);
        assert_eq!(heads.missing("n2", 0), None);
    }
}
