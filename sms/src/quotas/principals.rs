//! Which principals a node may count a per-principal quota for. A
//! principal is whoever the node says a run was for; one SMS sent the run
//! proves it with the run's delegation (sealed by SMS for that node). A
//! node may name only a few others per task and window (runs people made
//! on the node itself), so it cannot make up thousands of principals,
//! each a counter of its own (and an etcd key).
//!
//! Entry point: [`Principals::admit`].

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;

/// Principals without a delegation a node may name per task and window.
pub const MAX_UNSEALED: usize = 32;
/// (node, task, window) sets kept before ended windows are forgotten.
const MAX_SETS: usize = 100_000;

/// The principals each node named without a delegation, per task and
/// window.
#[derive(Default)]
pub struct Principals {
    named: Mutex<HashMap<(String, String, u64), HashSet<String>>>,
}

impl Principals {
    /// Whether `node` may count a principal (by its `counter`, which
    /// holds the principal's digest, not its text: a node chooses the
    /// text, and its size) for `task` in the window ending at `window_end`
    /// without a delegation: it named it before in this window, or names
    /// fewer than [`MAX_UNSEALED`].
    pub fn admit(&self, node: &str, task: &str, window_end: u64, counter: &str) -> bool {
        let mut named = self.named.lock();
        let set_key = (node.to_string(), task.to_string(), window_end);
        if named.len() >= MAX_SETS && !named.contains_key(&set_key) {
            named.retain(|(_, _, end), _| *end >= window_end);
        }
        let set = named.entry(set_key).or_default();
        if set.contains(counter) {
            return true;
        }
        if set.len() >= MAX_UNSEALED {
            return false;
        }
        set.insert(counter.to_string());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_names_a_few_principals_per_task_and_window() {
        let principals = Principals::default();
        for i in 0..MAX_UNSEALED {
            assert!(principals.admit("n", "t", 60_000, &format!("p{i}")));
        }
        assert!(!principals.admit("n", "t", 60_000, "one more"));
        assert!(
            principals.admit("n", "t", 60_000, "p3"),
            "a known one stays"
        );
        assert!(principals.admit("m", "t", 60_000, "one more"), "per node");
        assert!(principals.admit("n", "u", 60_000, "one more"), "per task");
        assert!(
            principals.admit("n", "t", 120_000, "one more"),
            "per window"
        );
    }
}
