//! What each node holds of each quota: the slices SMS granted it, so a
//! node cannot take the fleet's window without spending it
//! (docs/decisions/0010-quotas.md, "A node's slices"). Entry point:
//! [`Holdings::begin`].
//!
//! Per (node, counter) and window, a small state machine:
//!
//! ```text
//!   Idle ──begin(used)──▶ Asking ──granted(g)──▶ Holding(g) ──begin(used)──▶ Asking …
//!                           │ a second begin: refused (one ask at a time)
//!                           │ the take fails: back as it was, nothing settled
//! ```
//!
//! `begin` settles the slice the node holds: of its `g` units the node
//! says it used `used`; the rest are *returned* to the window. So a node
//! holds one slice of a counter at a time, and units it never reports
//! come back as soon as it asks again; a node that says nothing
//! (`used = 0`) gives everything back. What the node was granted in the
//! window, and half the limit, bound the tokens and cost it may say it
//! spent past its slices (see [`Settled::spent_bound`]).
//!
//! Each replica keeps its own holdings (in memory): a node that moves to
//! another replica leaves its last slice counted there, never returned
//! twice.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Pairs of (node, counter) held before ended windows are forgotten;
/// past it even current ones are (forgetting returns nothing: the units
/// stay counted).
const MAX_HOLDINGS: usize = 200_000;

#[derive(Debug, Default, Clone, Copy)]
struct Holding {
    window_end: u64,
    /// Units of the last slice, not yet settled.
    outstanding: u64,
    /// Every unit granted to this node in the window.
    granted: u64,
    asking: bool,
}

/// The slices every node holds; shared by every take of this replica.
#[derive(Default)]
pub struct Holdings {
    held: Arc<Mutex<HashMap<(String, String), Holding>>>,
}

/// A take begun: the node's last slice settled (not yet applied). Dropped
/// without [`Begun::granted`] (the take failed, or its caller went away),
/// the holding is as it was.
pub struct Begun {
    held: Arc<Mutex<HashMap<(String, String), Holding>>>,
    pair: (String, String),
    window_end: u64,
    pub settled: Settled,
    done: bool,
}

/// What settling the node's last slice gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Units of the last slice the node did not use.
    pub returned: u64,
    /// Units granted to the node in this window before this take.
    pub granted_before: u64,
}

impl Settled {
    /// The most this take may count of what a node says it spent past its
    /// slices (tokens, cost): what it was granted in the window and half
    /// the limit. A model request is made with one unit in hand and may
    /// use far more (a small token quota, a large request: a tighter bound
    /// let a 20-token quota be passed by 15-token requests), so the bound
    /// is wide; but no one report, however absurd, spends the window for
    /// the other nodes.
    pub fn spent_bound(&self, max: u64) -> u64 {
        self.granted_before.saturating_add(max / 2)
    }
}

/// A second take of a counter by the same node while the first is
/// unanswered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StillAsking;

impl Holdings {
    /// Begins a take of `counter` by `node` in the window ending at
    /// `window_end`, whose last slice the node says it used `used` of.
    pub fn begin(
        &self,
        node: &str,
        counter: &str,
        window_end: u64,
        used: u64,
    ) -> Result<Begun, StillAsking> {
        let pair = (node.to_string(), counter.to_string());
        let mut held = self.held.lock();
        if held.len() >= MAX_HOLDINGS && !held.contains_key(&pair) {
            held.retain(|_, h| h.window_end >= window_end || h.asking);
            if held.len() >= MAX_HOLDINGS {
                held.retain(|_, h| h.asking);
            }
        }
        let holding = held.entry(pair.clone()).or_default();
        if holding.asking {
            return Err(StillAsking);
        }
        if holding.window_end != window_end {
            // A slice of an ended window is void on the node and at SMS.
            *holding = Holding {
                window_end,
                ..Holding::default()
            };
        }
        holding.asking = true;
        let settled = Settled {
            returned: holding.outstanding - used.min(holding.outstanding),
            granted_before: holding.granted,
        };
        Ok(Begun {
            held: Arc::clone(&self.held),
            pair,
            window_end,
            settled,
            done: false,
        })
    }

    /// Units `node` holds unsettled of `counter`.
    #[cfg(test)]
    pub fn outstanding(&self, node: &str, counter: &str) -> u64 {
        self.held
            .lock()
            .get(&(node.to_string(), counter.to_string()))
            .map_or(0, |h| h.outstanding)
    }
}

impl Begun {
    /// The take was counted: the last slice is settled and `granted` is
    /// the node's new one.
    pub fn granted(mut self, granted: u64) {
        self.done = true;
        let mut held = self.held.lock();
        let holding = held.entry(self.pair.clone()).or_default();
        if holding.window_end == self.window_end {
            holding.outstanding = granted;
            holding.granted = holding.granted.saturating_add(granted);
        }
        holding.asking = false;
    }
}

impl Drop for Begun {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(holding) = self.held.lock().get_mut(&self.pair) {
            holding.asking = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_take_settles_the_last_slice_and_returns_what_was_not_used() {
        let holdings = Holdings::default();
        let first = holdings.begin("n", "k", 60_000, 0).unwrap();
        assert_eq!(first.settled.returned, 0, "nothing held yet");
        first.granted(5);
        let second = holdings.begin("n", "k", 60_000, 2).unwrap();
        assert_eq!(
            second.settled,
            Settled {
                returned: 3,
                granted_before: 5
            }
        );
        second.granted(4);
        // A node that says it used more than it held returns nothing.
        let third = holdings.begin("n", "k", 60_000, 99).unwrap();
        assert_eq!(third.settled.returned, 0);
        assert_eq!(third.settled.granted_before, 9);
    }

    #[test]
    fn one_ask_at_a_time_and_a_failed_take_settles_nothing() {
        let holdings = Holdings::default();
        holdings.begin("n", "k", 60_000, 0).unwrap().granted(5);
        let asking = holdings.begin("n", "k", 60_000, 0).unwrap();
        assert!(holdings.begin("n", "k", 60_000, 0).is_err());
        assert!(
            holdings.begin("other", "k", 60_000, 0).is_ok(),
            "another node's ask is its own"
        );
        drop(asking);
        assert_eq!(
            holdings.outstanding("n", "k"),
            5,
            "the failed take returned nothing"
        );
        let again = holdings.begin("n", "k", 60_000, 0).unwrap();
        assert_eq!(again.settled.returned, 5);
    }

    #[test]
    fn a_report_counts_at_most_the_nodes_grants_and_half_the_limit() {
        let holdings = Holdings::default();
        let first = holdings.begin("n", "k", 60_000, 0).unwrap();
        assert_eq!(first.settled.spent_bound(100), 50);
        first.granted(5);
        let second = holdings.begin("n", "k", 60_000, 5).unwrap();
        assert_eq!(second.settled.spent_bound(100), 55);
    }

    #[test]
    fn a_new_window_voids_the_last_slice() {
        let holdings = Holdings::default();
        holdings.begin("n", "k", 60_000, 0).unwrap().granted(5);
        let next = holdings.begin("n", "k", 120_000, 0).unwrap();
        assert_eq!(
            next.settled,
            Settled {
                returned: 0,
                granted_before: 0
            }
        );
    }
}
