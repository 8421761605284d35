//! `sms usage`: what was used, totalled from the audit trail the nodes
//! ship: runs, model requests, tokens, tool calls and cost, for a task, a
//! principal, a server or a tool, since a time. The trail is the one
//! source: a run's reply and `sms usage` add up the same records, so they
//! agree to the nano-dollar. Entry point: [`Totals::add`].

use std::collections::{BTreeMap, BTreeSet};

use spear_proto::audit::{Kind, Record};
use spear_proto::usage::Used;
use spear_proto::v1::{UsageBucket, UsageRequest, UsageResponse};

/// The shortest window a chart may ask for, and the most windows answered.
pub const MIN_BUCKET_MS: u64 = 60_000;
pub const MAX_BUCKETS: usize = 1_000;

/// Runs and what they used.
#[derive(Debug, Default)]
struct Sum {
    runs: BTreeSet<(String, String)>,
    used: Used,
}

impl Sum {
    fn add(&mut self, node: &str, record: &Record) {
        if !record.invocation.is_empty() {
            self.runs
                .insert((node.to_string(), record.invocation.clone()));
        }
        self.used.add(record);
    }
}

/// Totals over the records a filter matches, and per window when asked.
#[derive(Debug, Default)]
pub struct Totals {
    all: Sum,
    buckets: BTreeMap<u64, Sum>,
}

/// Whether `record` counts for `filter`. A server or tool filter looks at
/// tool calls only: model requests belong to no server.
fn matches(filter: &UsageRequest, record: &Record) -> bool {
    let by_call = !filter.server_id.is_empty() || !filter.tool.is_empty();
    (filter.task_id.is_empty() || record.task == filter.task_id)
        && (filter.principal.is_empty() || record.principal == filter.principal)
        && (filter.server_id.is_empty() || record.server == filter.server_id)
        && (filter.tool.is_empty() || record.tool == filter.tool)
        && (!by_call || record.kind == Kind::ToolCall)
        && record.time_ms >= filter.since_ms
        && matches!(record.kind, Kind::ToolCall | Kind::ModelRequest)
}

impl Totals {
    /// Counts `record` (from `node`) if `filter` matches it.
    pub fn add(&mut self, filter: &UsageRequest, node: &str, record: &Record) {
        if !matches(filter, record) {
            return;
        }
        self.all.add(node, record);
        if filter.bucket_ms >= MIN_BUCKET_MS {
            let start = record.time_ms / filter.bucket_ms * filter.bucket_ms;
            self.buckets.entry(start).or_default().add(node, record);
            if self.buckets.len() > MAX_BUCKETS {
                self.buckets.pop_first();
            }
        }
    }

    pub fn into_response(self) -> UsageResponse {
        UsageResponse {
            runs: self.all.runs.len() as u64,
            used: Some(self.all.used.to_proto()),
            buckets: self
                .buckets
                .into_iter()
                .map(|(start_ms, sum)| UsageBucket {
                    start_ms,
                    runs: sum.runs.len() as u64,
                    used: Some(sum.used.to_proto()),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spear_proto::audit::Outcome;

    fn record(kind: Kind, outcome: Outcome, task: &str, invocation: &str) -> Record {
        Record {
            kind,
            outcome,
            task: task.into(),
            invocation: invocation.into(),
            principal: "https://idp#alice".into(),
            server: if kind == Kind::ToolCall {
                "fs".into()
            } else {
                String::new()
            },
            time_ms: 1_000,
            ..Record::default()
        }
    }

    #[test]
    fn totals_count_runs_requests_tokens_calls_and_cost_for_the_filter() {
        let mut asked = record(Kind::ModelRequest, Outcome::Answered, "t", "inv-1");
        asked.input_tokens = Some(10);
        asked.output_tokens = Some(5);
        asked.cost_nano_usd = Some(4_500);
        let unpriced = record(Kind::ModelRequest, Outcome::Answered, "t", "inv-2");
        let ran = record(Kind::ToolCall, Outcome::Run, "t", "inv-1");
        let denied = record(Kind::ToolCall, Outcome::Denied, "t", "inv-1");
        let other = record(Kind::ToolCall, Outcome::Run, "other", "inv-9");
        let all = [&asked, &unpriced, &ran, &denied, &other];

        let mut totals = Totals::default();
        let task = UsageRequest {
            task_id: "t".into(),
            ..Default::default()
        };
        for r in all {
            totals.add(&task, "node-a", r);
        }
        let t = totals.into_response();
        let u = t.used.unwrap_or_default();
        assert_eq!(
            (t.runs, u.model_requests, u.unpriced_model_requests),
            (2, 2, 1)
        );
        assert_eq!((u.input_tokens, u.output_tokens, u.tool_calls), (10, 5, 1));
        assert_eq!(u.cost_nano_usd, 4_500);

        // By server: tool calls only.
        let mut totals = Totals::default();
        let server = UsageRequest {
            server_id: "fs".into(),
            ..Default::default()
        };
        for r in all {
            totals.add(&server, "node-a", r);
        }
        let t = totals.into_response();
        let u = t.used.unwrap_or_default();
        assert_eq!((t.runs, u.model_requests, u.tool_calls), (2, 0, 2));

        // Since a later time: nothing.
        let mut totals = Totals::default();
        let later = UsageRequest {
            since_ms: 2_000,
            ..Default::default()
        };
        for r in all {
            totals.add(&later, "node-a", r);
        }
        let t = totals.into_response();
        assert_eq!((t.runs, t.used.unwrap_or_default().model_requests), (0, 0));
    }

    #[test]
    fn a_chart_gets_each_window_s_totals() {
        let at = |ms: u64, cost: u64, invocation: &str| Record {
            time_ms: ms,
            cost_nano_usd: Some(cost),
            ..record(Kind::ModelRequest, Outcome::Answered, "t", invocation)
        };
        let hour = 3_600_000;
        let records = [
            at(10, 1, "a"),
            at(hour - 1, 2, "a"),
            at(hour, 4, "b"),
            at(3 * hour + 5, 8, "c"),
        ];
        let filter = UsageRequest {
            bucket_ms: hour,
            ..Default::default()
        };
        let mut totals = Totals::default();
        for r in &records {
            totals.add(&filter, "node-a", r);
        }
        let t = totals.into_response();
        let windows: Vec<(u64, u64, u64)> = t
            .buckets
            .iter()
            .map(|b| (b.start_ms, b.runs, b.used.unwrap_or_default().cost_nano_usd))
            .collect();
        assert_eq!(windows, [(0, 1, 3), (hour, 1, 4), (3 * hour, 1, 8)]);
        assert_eq!(
            t.used.unwrap_or_default().cost_nano_usd,
            15,
            "the total is every window's"
        );
        // A window under a minute is not charted.
        let mut totals = Totals::default();
        let fine = UsageRequest {
            bucket_ms: 1_000,
            ..Default::default()
        };
        totals.add(&fine, "node-a", &records[0]);
        assert!(totals.into_response().buckets.is_empty());
    }
}
