//! `sms usage`: what was used, totalled from the audit trail the nodes
//! ship: runs, model requests, tokens, tool calls and cost, for a task, a
//! principal, a server or a tool, since a time. The trail is the one
//! source: a run's reply and `sms usage` add up the same records, so they
//! agree to the nano-dollar. Entry point: [`Totals::add`].

use std::collections::BTreeSet;

use spear_proto::audit::{Kind, Record};
use spear_proto::usage::Used;
use spear_proto::v1::{UsageRequest, UsageResponse};

/// Totals over the records a filter matches.
#[derive(Debug, Default)]
pub struct Totals {
    runs: BTreeSet<(String, String)>,
    used: Used,
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
        if !record.invocation.is_empty() {
            self.runs
                .insert((node.to_string(), record.invocation.clone()));
        }
        self.used.add(record);
    }

    pub fn into_response(self) -> UsageResponse {
        UsageResponse {
            runs: self.runs.len() as u64,
            used: Some(self.used.to_proto()),
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
}
