//! The audit record: what nodes write and SMS keeps and verifies, so both
//! compute a record's hash the same way (docs/trust.md).
//!
//! A record is one JSON object on one line. Its `hash` is SHA-256 (hex)
//! over the RFC 8785 canonical JSON of the record without `hash`; its
//! `prev` is the hash of the node's record before it (`seq - 1`), so an
//! edited, removed or inserted record breaks the chain at that point.
//! Records say what was decided and why (outcome, rule, policy revision,
//! digests, durations, budgets), never arguments, results or secrets.

use serde::{Deserialize, Serialize};

/// The record format this code writes.
pub const VERSION: u32 = 1;

/// What a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    ToolCall,
    ModelRequest,
    Pin,
    /// A write to SMS by an admin (SMS's own chain).
    Admin,
    /// The node lost its audit log (its directory was empty at start) and
    /// goes on from the last record SMS holds of it.
    Reset,
}

impl Kind {
    /// Its name in records and on screen (`tool_call`, `model_request`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Kind::ToolCall => "tool_call",
            Kind::ModelRequest => "model_request",
            Kind::Pin => "pin",
            Kind::Admin => "admin",
            Kind::Reset => "reset",
        }
    }
}

/// What was decided. Tool calls: `run`, `failed` (it ran, the server
/// answered an error or did not answer), `denied` (policy), `held` (pin
/// drift), `waiting` / `approved` / `approval_denied` / `expired`
/// (approvals), `budget` (a run budget refused it). Model requests:
/// `answered` or `failed`. Pins: `pinned`, `drift`. Admin writes: `run`
/// or `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    #[default]
    Run,
    Failed,
    Denied,
    Held,
    Waiting,
    Approved,
    ApprovalDenied,
    Expired,
    Budget,
    Answered,
    Pinned,
    Drift,
    /// Past a fleet quota (docs/quotas.md): not made.
    Quota,
}

impl Outcome {
    pub const NAMES: [&'static str; 13] = [
        "run",
        "failed",
        "denied",
        "held",
        "waiting",
        "approved",
        "approval_denied",
        "expired",
        "budget",
        "answered",
        "pinned",
        "drift",
        "quota",
    ];

    /// Its name in records (`NAMES` is in declaration order).
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(name: &str) -> Option<Outcome> {
        serde_json::from_value(serde_json::Value::String(name.to_string())).ok()
    }
}

fn empty(text: &str) -> bool {
    text.is_empty()
}

/// One audit record. Empty strings and absent numbers are left out of
/// the JSON.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Record {
    pub v: u32,
    pub node: String,
    pub seq: u64,
    /// The previous record's `hash`; empty for a node's first record.
    #[serde(default, skip_serializing_if = "empty")]
    pub prev: String,
    pub time_ms: u64,
    pub kind: Kind,
    pub outcome: Outcome,
    /// Who acted: the run's caller, or the admin.
    #[serde(default, skip_serializing_if = "empty")]
    pub identity: String,
    /// Who the run is for ([`crate::v1::Principal::label`]): a person as
    /// `<issuer>#<subject>`, or the admin who invoked it.
    #[serde(default, skip_serializing_if = "empty")]
    pub principal: String,
    /// Who acted for the principal: `node/<id>`, the node that ran it.
    #[serde(default, skip_serializing_if = "empty")]
    pub actor: String,
    /// An admin write: what was done (`upsert_server`) and to what.
    #[serde(default, skip_serializing_if = "empty")]
    pub action: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub target: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub task: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub invocation: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub server: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub tool: String,
    /// The rule `spearlet explain` would name, or why it was refused.
    #[serde(default, skip_serializing_if = "empty")]
    pub rule: String,
    /// The server record's revision the policy came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_revision: Option<u64>,
    /// The tool definition's digest (its pin when pinned).
    #[serde(default, skip_serializing_if = "empty")]
    pub pin: String,
    /// SHA-256 of the arguments' canonical JSON.
    #[serde(default, skip_serializing_if = "empty")]
    pub args: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub approval: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// Tool calls the run had used after this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls_used: Option<u64>,
    #[serde(default, skip_serializing_if = "empty")]
    pub backend: String,
    #[serde(default, skip_serializing_if = "empty")]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// A model request's cost at the node's prices, in nano-dollars;
    /// absent when its model is not priced (docs/usage.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_nano_usd: Option<u64>,
    #[serde(default, skip_serializing_if = "empty")]
    pub hash: String,
}

impl Record {
    /// The hash of this record's contents (everything but `hash`).
    pub fn content_hash(&self) -> String {
        let mut value = match serde_json::to_value(self) {
            Ok(value) => value,
            Err(_) => return String::new(),
        };
        if let Some(fields) = value.as_object_mut() {
            fields.remove("hash");
        }
        crate::pins::digest(&value)
    }

    /// Numbers this record `seq` after `prev` and sets its hash; returns
    /// its line (JSON, no newline).
    pub fn seal(&mut self, seq: u64, prev: &str) -> String {
        self.v = VERSION;
        self.seq = seq;
        self.prev = prev.to_string();
        self.hash = String::new();
        self.hash = self.content_hash();
        // Strings and numbers always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Why a chain is not whole; each names the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainProblem {
    #[error("record {seq} is not a valid audit record: {reason}")]
    Unreadable { seq: u64, reason: String },
    #[error("record {seq} was altered: its hash does not match its contents")]
    Altered { seq: u64 },
    #[error("records {from} to {to} are missing")]
    Gap { from: u64, to: u64 },
    #[error("record {seq} does not follow record {prev_seq}: its prev is not that record's hash")]
    Broken { seq: u64, prev_seq: u64 },
    #[error("record {seq} belongs to node '{found}', not '{expected}'")]
    OtherNode {
        seq: u64,
        found: String,
        expected: String,
    },
}

/// Checks one node's records in sequence order, one at a time.
#[derive(Debug, Default)]
pub struct ChainCheck {
    node: String,
    last: Option<(u64, String)>,
    pub first_seq: Option<u64>,
    pub records: u64,
}

impl ChainCheck {
    pub fn new(node: &str) -> Self {
        Self {
            node: node.to_string(),
            ..Self::default()
        }
    }

    /// The record with sequence number `seq`, as the line `json`. The first
    /// record checked anchors the chain (earlier ones may have been
    /// retired); every later one must follow it with no gap.
    pub fn push(&mut self, seq: u64, json: &str) -> Result<Record, ChainProblem> {
        let record: Record = serde_json::from_str(json).map_err(|e| ChainProblem::Unreadable {
            seq,
            reason: e.to_string(),
        })?;
        if record.seq != seq {
            return Err(ChainProblem::Unreadable {
                seq,
                reason: format!("it says it is record {}", record.seq),
            });
        }
        if record.node != self.node {
            return Err(ChainProblem::OtherNode {
                seq,
                found: record.node,
                expected: self.node.clone(),
            });
        }
        if record.content_hash() != record.hash {
            return Err(ChainProblem::Altered { seq });
        }
        if let Some((last_seq, last_hash)) = &self.last {
            if seq != last_seq + 1 {
                return Err(ChainProblem::Gap {
                    from: last_seq + 1,
                    to: seq - 1,
                });
            }
            if &record.prev != last_hash {
                return Err(ChainProblem::Broken {
                    seq,
                    prev_seq: *last_seq,
                });
            }
        }
        self.first_seq.get_or_insert(seq);
        self.records += 1;
        self.last = Some((seq, record.hash.clone()));
        Ok(record)
    }

    /// The last record's sequence number and hash.
    pub fn last(&self) -> Option<(u64, &str)> {
        self.last.as_ref().map(|(seq, hash)| (*seq, hash.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the CLI prints is what records say (and `--kind` would take).
    #[test]
    fn a_kinds_name_is_its_name_in_records() {
        for kind in [
            Kind::ToolCall,
            Kind::ModelRequest,
            Kind::Pin,
            Kind::Admin,
            Kind::Reset,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
    }

    fn chain(n: u64) -> Vec<String> {
        let mut prev = String::new();
        (1..=n)
            .map(|seq| {
                let mut record = Record {
                    node: "n1".into(),
                    tool: "write_file".into(),
                    outcome: Outcome::Run,
                    ..Record::default()
                };
                let line = record.seal(seq, &prev);
                prev = record.hash;
                line
            })
            .collect()
    }

    fn check(lines: &[(u64, String)]) -> Result<(), ChainProblem> {
        let mut check = ChainCheck::new("n1");
        for (seq, line) in lines {
            check.push(*seq, line)?;
        }
        Ok(())
    }

    #[test]
    fn a_whole_chain_passes_and_each_kind_of_break_is_named() {
        let lines: Vec<(u64, String)> =
            chain(5).into_iter().zip(1..).map(|(l, s)| (s, l)).collect();
        assert_eq!(check(&lines), Ok(()));

        let mut edited = lines.clone();
        edited[2].1 = edited[2].1.replace("write_file", "read_file");
        assert_eq!(check(&edited), Err(ChainProblem::Altered { seq: 3 }));

        let mut gap = lines.clone();
        gap.remove(2);
        assert_eq!(check(&gap), Err(ChainProblem::Gap { from: 3, to: 3 }));

        // A record re-sealed after an edit has a good hash, but the next
        // record's prev still names the original.
        let mut resealed = lines.clone();
        let mut record: Record = serde_json::from_str(&resealed[2].1).unwrap();
        record.tool = "read_file".into();
        let prev = record.prev.clone();
        resealed[2].1 = record.seal(3, &prev);
        assert_eq!(
            check(&resealed),
            Err(ChainProblem::Broken {
                seq: 4,
                prev_seq: 3
            })
        );
        // A chain may start after retired records.
        assert_eq!(check(&lines[2..]), Ok(()));
    }

    #[test]
    fn outcome_names_round_trip() {
        for name in Outcome::NAMES {
            let outcome = Outcome::parse(name).unwrap();
            assert_eq!(outcome.name(), name);
            assert_eq!(serde_json::to_value(outcome).unwrap(), name);
        }
        assert_eq!(Outcome::parse("allowed"), None);
    }
}
