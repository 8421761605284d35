//! Why SMS refuses a node's take, or counts less than it said: one
//! sentence each, and a count per reason for `/metrics`
//! (`sms_quota_refusals_total{reason}`).

use std::sync::atomic::{AtomicU64, Ordering};

/// A take SMS does not grant as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("node '{node}' asked for a slice of {quota} while its last ask was unanswered; a node asks for one slice of a quota at a time")]
    StillAsking { node: String, quota: String },
    #[error("node '{node}' named more than {max} principals of task '{task}' in this window that SMS sent it no run for; a per-principal quota counts the principals of runs SMS sent that node (their delegations) and a few others; invoke the task through SMS (`sms invoke`, with SMS sealing delegations: --oauth-key-file) so its runs carry one")]
    Principals {
        node: String,
        task: String,
        max: usize,
    },
    #[error("node '{node}' named a principal of {len} bytes for task '{task}'; a principal is at most {max} bytes (an issuer and a subject)")]
    LongPrincipal {
        node: String,
        task: String,
        len: usize,
        max: usize,
    },
    #[error("node '{node}' counted {quota} with a delegation SMS does not honour: {why}")]
    Delegation {
        node: String,
        quota: String,
        why: String,
    },
}

/// Why a take was refused or cut, as `/metrics` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    StillAsking,
    Principals,
    Delegation,
    /// Spent units past what the node was granted: counted up to that.
    SpentPastGrant,
}

const REASONS: [Reason; 4] = [
    Reason::StillAsking,
    Reason::Principals,
    Reason::Delegation,
    Reason::SpentPastGrant,
];

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::StillAsking => "still_asking",
            Reason::Principals => "principals",
            Reason::Delegation => "delegation",
            Reason::SpentPastGrant => "spent_past_grant",
        }
    }
}

impl Refusal {
    pub fn reason(&self) -> Reason {
        match self {
            Refusal::StillAsking { .. } => Reason::StillAsking,
            Refusal::Principals { .. } | Refusal::LongPrincipal { .. } => Reason::Principals,
            Refusal::Delegation { .. } => Reason::Delegation,
        }
    }
}

static COUNTS: [AtomicU64; 4] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

/// Counts one refusal for `/metrics`; returns how many of that reason
/// there were, this one included.
pub fn count(reason: Reason) -> u64 {
    COUNTS[reason as usize].fetch_add(1, Ordering::Relaxed) + 1
}

/// Every reason with its count, for `/metrics`.
pub fn counts() -> impl Iterator<Item = (&'static str, u64)> {
    REASONS
        .iter()
        .map(|r| (r.label(), COUNTS[*r as usize].load(Ordering::Relaxed)))
}
