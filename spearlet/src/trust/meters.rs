//! What the node's model requests used, by task, principal and model, for
//! its metrics (`spearlet_model_tokens_total`, `spearlet_model_cost_usd_total`;
//! docs/usage.md). Counted from the same audit records as a run's usage, so
//! the metrics, the replies and `sms usage` agree.
//!
//! A node sees few tasks and models but possibly many principals: past
//! [`MAX_SERIES`] label sets, new ones are counted under `_other`, so a
//! burst of people cannot grow the node's memory or a scrape without bound.

use std::collections::HashMap;

use parking_lot::Mutex;
use spear_proto::audit::{Kind, Outcome, Record};

/// Label sets kept before new ones are counted under `_other`.
pub const MAX_SERIES: usize = 1_000;
/// The label value standing for every label set past [`MAX_SERIES`].
pub const OTHER: &str = "_other";

/// One label set's totals.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_nano_usd: u64,
}

/// (task, principal, model).
pub type Labels = (String, String, String);

/// The node's model usage by label set.
#[derive(Debug, Default)]
pub struct UsageMeters {
    series: Mutex<HashMap<Labels, Totals>>,
}

impl UsageMeters {
    /// Counts `record` (with its run's ids filled in) if it is a model
    /// request that was made.
    pub fn add(&self, record: &Record) {
        if record.kind != Kind::ModelRequest || record.outcome == Outcome::Quota {
            return;
        }
        let mut labels = (
            record.task.clone(),
            record.principal.clone(),
            record.model.clone(),
        );
        let mut series = self.series.lock();
        if !series.contains_key(&labels) && series.len() >= MAX_SERIES {
            labels = (OTHER.into(), OTHER.into(), OTHER.into());
        }
        let totals = series.entry(labels).or_default();
        totals.requests += 1;
        totals.input_tokens += record.input_tokens.unwrap_or(0);
        totals.output_tokens += record.output_tokens.unwrap_or(0);
        totals.cost_nano_usd += record.cost_nano_usd.unwrap_or(0);
    }

    /// Every label set and its totals, sorted.
    pub fn snapshot(&self) -> Vec<(Labels, Totals)> {
        let mut all: Vec<(Labels, Totals)> = self
            .series
            .lock()
            .iter()
            .map(|(labels, totals)| (labels.clone(), *totals))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(principal: &str, tokens: u64) -> Record {
        Record {
            kind: Kind::ModelRequest,
            outcome: Outcome::Answered,
            task: "notes".into(),
            principal: principal.into(),
            model: "m".into(),
            input_tokens: Some(tokens),
            output_tokens: Some(1),
            cost_nano_usd: Some(7),
            ..Record::default()
        }
    }

    #[test]
    fn requests_are_counted_by_task_principal_and_model() {
        let meters = UsageMeters::default();
        meters.add(&request("alice", 10));
        meters.add(&request("alice", 5));
        meters.add(&request("bob", 1));
        meters.add(&Record {
            outcome: Outcome::Quota,
            ..request("bob", 100)
        });
        let all = meters.snapshot();
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0].1,
            Totals {
                requests: 2,
                input_tokens: 15,
                output_tokens: 2,
                cost_nano_usd: 14
            }
        );
        assert_eq!(
            all[1].1.requests, 1,
            "a request a quota refused was not made"
        );
    }

    #[test]
    fn past_the_cap_new_label_sets_are_counted_together() {
        let meters = UsageMeters::default();
        for i in 0..MAX_SERIES + 50 {
            meters.add(&request(&format!("p{i}"), 1));
        }
        let all = meters.snapshot();
        assert_eq!(all.len(), MAX_SERIES + 1);
        let other = all.iter().find(|(l, _)| l.1 == OTHER).unwrap();
        assert_eq!(other.1.requests, 50);
    }
}
