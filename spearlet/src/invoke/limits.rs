//! A run's limits: the task's `limits` over the node's defaults, within the
//! node's caps (`[guests.limits]`). A task asking for more than a cap is
//! refused with both keys named, never silently cut.

use std::time::Duration;

use spear_proto::task::TaskLimits;

use crate::cchat::{BudgetLimits, ChatLimits};
use crate::wasm::GuestLimits;

const MB: u64 = 1 << 20;

/// The limits of one run: the runtime's and its chat's.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunLimits {
    pub guest: GuestLimits,
    pub chat: ChatLimits,
}

/// The node's defaults and caps, as one value per task key.
#[derive(Debug, Clone)]
pub struct LimitPolicy {
    /// `[guests.limits]`, keyed as a task's `limits`.
    caps: TaskLimits,
    defaults: RunLimits,
}

impl LimitPolicy {
    /// The built-in defaults, lowered to the caps where they are lower.
    pub fn new(caps: TaskLimits) -> LimitPolicy {
        let RunLimits { guest: g, chat: c } = RunLimits::default();
        let cap = |value: u64, cap: Option<u64>| cap.map_or(value, |c| value.min(c));
        let memory_mb = caps.memory_mb.map(u64::from);
        let max_sessions = caps.max_sessions.map(u64::from);
        let max_iterations = caps.max_iterations.map(u64::from);
        let max_total_tool_calls = caps.max_total_tool_calls.map(u64::from);
        let ms = |d: Duration, c: Option<u64>| Duration::from_millis(cap(d.as_millis() as u64, c));
        let guest = GuestLimits {
            memory_bytes: (cap(g.memory_bytes as u64 / MB, memory_mb) * MB) as usize,
            table_elements: g.table_elements,
            cpu: ms(g.cpu, caps.cpu_ms),
            wall: ms(g.wall, caps.wall_ms),
            output_bytes: cap(g.output_bytes as u64, caps.output_bytes) as usize,
        };
        let chat = ChatLimits {
            max_sessions: cap(c.max_sessions as u64, max_sessions) as usize,
            max_iterations: cap(u64::from(c.max_iterations), max_iterations) as u32,
            max_total_tool_calls: cap(u64::from(c.max_total_tool_calls), max_total_tool_calls)
                as u32,
            budget: BudgetLimits {
                host_memory_bytes: cap(c.budget.host_memory_bytes / MB, caps.host_memory_mb) * MB,
                model_requests: cap(c.budget.model_requests, caps.max_model_requests),
                tokens: cap(c.budget.tokens, caps.max_tokens),
                tool_calls: cap(c.budget.tool_calls, caps.max_tool_calls),
            },
        };
        let defaults = RunLimits { guest, chat };
        LimitPolicy { caps, defaults }
    }

    pub fn defaults(&self) -> &RunLimits {
        &self.defaults
    }

    /// The limits of a run of a task with `limits`.
    pub fn for_task(&self, limits: &TaskLimits) -> Result<RunLimits, LimitRefused> {
        for ((key, value, _), (_, cap, _)) in limits.entries().into_iter().zip(self.caps.entries())
        {
            if let (Some(value), Some(cap)) = (value, cap) {
                if value > cap {
                    return Err(LimitRefused { key, value, cap });
                }
            }
        }
        let RunLimits { guest: g, chat: c } = &self.defaults;
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        let guest = GuestLimits {
            memory_bytes: limits
                .memory_mb
                .map_or(g.memory_bytes, |mb| (mb as usize) << 20),
            table_elements: g.table_elements,
            cpu: ms(limits.cpu_ms, g.cpu),
            wall: ms(limits.wall_ms, g.wall),
            output_bytes: limits.output_bytes.map_or(g.output_bytes, |b| b as usize),
        };
        let chat = ChatLimits {
            max_sessions: limits.max_sessions.map_or(c.max_sessions, |n| n as usize),
            max_iterations: limits.max_iterations.unwrap_or(c.max_iterations),
            max_total_tool_calls: limits
                .max_total_tool_calls
                .unwrap_or(c.max_total_tool_calls),
            budget: BudgetLimits {
                host_memory_bytes: limits
                    .host_memory_mb
                    .map_or(c.budget.host_memory_bytes, |mb| mb * MB),
                model_requests: limits.max_model_requests.unwrap_or(c.budget.model_requests),
                tokens: limits.max_tokens.unwrap_or(c.budget.tokens),
                tool_calls: limits.max_tool_calls.unwrap_or(c.budget.tool_calls),
            },
        };
        Ok(RunLimits { guest, chat })
    }
}

/// A task asking for more than the node's cap of one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the task asks for limits.{key} = {value}, more than this node allows (guests.limits.{key} = {cap})")]
pub struct LimitRefused {
    pub key: &'static str,
    pub value: u64,
    pub cap: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_get_defaults_within_caps_and_are_refused_past_them() {
        let policy = LimitPolicy::new(TaskLimits {
            wall_ms: Some(10_000),
            host_memory_mb: Some(4),
            ..TaskLimits::default()
        });
        let d = policy.defaults();
        assert_eq!(
            d.guest.wall,
            Duration::from_secs(10),
            "the default is lowered to the cap"
        );
        assert_eq!(d.chat.budget.host_memory_bytes, 4 * MB);
        assert_eq!(d.guest.cpu, GuestLimits::default().cpu);

        let asks = TaskLimits {
            wall_ms: Some(5_000),
            max_model_requests: Some(3),
            ..TaskLimits::default()
        };
        let limits = policy.for_task(&asks).unwrap();
        assert_eq!(limits.guest.wall, Duration::from_secs(5));
        assert_eq!(limits.chat.budget.model_requests, 3);

        let greedy = TaskLimits {
            wall_ms: Some(20_000),
            ..TaskLimits::default()
        };
        let refused = policy.for_task(&greedy).unwrap_err().to_string();
        assert!(
            refused.contains("limits.wall_ms = 20000")
                && refused.contains("guests.limits.wall_ms = 10000"),
            "{refused}"
        );
    }
}
