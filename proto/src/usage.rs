//! What audit records add up to: model requests, tokens, tool calls that
//! reached a server, and cost. One rule, used by a node for its run's reply
//! and by SMS for `sms usage`, so the two always agree. Entry point:
//! [`Used::add`].

use crate::audit::{Kind, Outcome, Record};

/// Totals of some records.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Used {
    pub model_requests: u64,
    /// Requests of models the node's price table does not name.
    pub unpriced_model_requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Calls that reached their server, answered or failed (refused and
    /// held calls never did).
    pub tool_calls: u64,
    /// Nano-dollars, summed exactly.
    pub cost_nano_usd: u64,
}

impl Used {
    /// Counts `record`, if it is a model request or a tool call.
    pub fn add(&mut self, record: &Record) {
        match record.kind {
            Kind::ModelRequest if record.outcome != Outcome::Quota => {
                self.model_requests += 1;
                self.input_tokens += record.input_tokens.unwrap_or(0);
                self.output_tokens += record.output_tokens.unwrap_or(0);
                match record.cost_nano_usd {
                    Some(cost) => self.cost_nano_usd += cost,
                    None => self.unpriced_model_requests += 1,
                }
            }
            Kind::ToolCall
                if matches!(
                    record.outcome,
                    Outcome::Run | Outcome::Failed | Outcome::Approved
                ) =>
            {
                self.tool_calls += 1;
            }
            _ => {}
        }
    }

    /// As the wire carries it.
    pub fn to_proto(self) -> crate::v1::RunUsage {
        crate::v1::RunUsage {
            model_requests: self.model_requests,
            unpriced_model_requests: self.unpriced_model_requests,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            tool_calls: self.tool_calls,
            cost_nano_usd: self.cost_nano_usd,
        }
    }
}
