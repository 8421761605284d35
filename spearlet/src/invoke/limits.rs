//! A run's limits: the task's `limits` over the node's defaults, within the
//! node's caps (`[guests.limits]`). A task asking for more than a cap is
//! refused with both keys named, never silently cut.

use std::time::Duration;

use spear_proto::task::TaskLimits;

use crate::cchat::BudgetLimits;
use crate::wasm::GuestLimits;

const MB: u64 = 1 << 20;

/// The node's defaults and caps, as one value per task key.
#[derive(Debug, Clone)]
pub struct LimitPolicy {
    /// `[guests.limits]`, keyed as a task's `limits`.
    caps: TaskLimits,
    defaults: GuestLimits,
}

impl LimitPolicy {
    /// The built-in defaults, lowered to the caps where they are lower.
    pub fn new(caps: TaskLimits) -> LimitPolicy {
        let d = GuestLimits::default();
        let cap = |value: u64, cap: Option<u64>| cap.map_or(value, |c| value.min(c));
        let memory_mb = caps.memory_mb.map(u64::from);
        let max_sessions = caps.max_sessions.map(u64::from);
        let max_iterations = caps.max_iterations.map(u64::from);
        let max_total_tool_calls = caps.max_total_tool_calls.map(u64::from);
        let ms = |d: Duration, c: Option<u64>| Duration::from_millis(cap(d.as_millis() as u64, c));
        let defaults = GuestLimits {
            memory_bytes: (cap(d.memory_bytes as u64 / MB, memory_mb) * MB) as usize,
            table_elements: d.table_elements,
            cpu: ms(d.cpu, caps.cpu_ms),
            wall: ms(d.wall, caps.wall_ms),
            output_bytes: cap(d.output_bytes as u64, caps.output_bytes) as usize,
            max_sessions: cap(d.max_sessions as u64, max_sessions) as usize,
            max_iterations: cap(u64::from(d.max_iterations), max_iterations) as u32,
            max_total_tool_calls: cap(u64::from(d.max_total_tool_calls), max_total_tool_calls)
                as u32,
            budget: BudgetLimits {
                host_memory_bytes: cap(d.budget.host_memory_bytes / MB, caps.host_memory_mb) * MB,
                model_requests: cap(d.budget.model_requests, caps.max_model_requests),
                tokens: cap(d.budget.tokens, caps.max_tokens),
                tool_calls: cap(d.budget.tool_calls, caps.max_tool_calls),
            },
        };
        LimitPolicy { caps, defaults }
    }

    pub fn defaults(&self) -> &GuestLimits {
        &self.defaults
    }

    /// The limits of a run of a task with `limits`.
    pub fn for_task(&self, limits: &TaskLimits) -> Result<GuestLimits, LimitRefused> {
        for ((key, value, _), (_, cap, _)) in limits.entries().into_iter().zip(self.caps.entries())
        {
            if let (Some(value), Some(cap)) = (value, cap) {
                if value > cap {
                    return Err(LimitRefused { key, value, cap });
                }
            }
        }
        let d = &self.defaults;
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        Ok(GuestLimits {
            memory_bytes: limits
                .memory_mb
                .map_or(d.memory_bytes, |mb| (mb as usize) << 20),
            table_elements: d.table_elements,
            cpu: ms(limits.cpu_ms, d.cpu),
            wall: ms(limits.wall_ms, d.wall),
            output_bytes: limits.output_bytes.map_or(d.output_bytes, |b| b as usize),
            max_sessions: limits.max_sessions.map_or(d.max_sessions, |n| n as usize),
            max_iterations: limits.max_iterations.unwrap_or(d.max_iterations),
            max_total_tool_calls: limits
                .max_total_tool_calls
                .unwrap_or(d.max_total_tool_calls),
            budget: BudgetLimits {
                host_memory_bytes: limits
                    .host_memory_mb
                    .map_or(d.budget.host_memory_bytes, |mb| mb * MB),
                model_requests: limits.max_model_requests.unwrap_or(d.budget.model_requests),
                tokens: limits.max_tokens.unwrap_or(d.budget.tokens),
                tool_calls: limits.max_tool_calls.unwrap_or(d.budget.tool_calls),
            },
        })
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
            d.wall,
            Duration::from_secs(10),
            "the default is lowered to the cap"
        );
        assert_eq!(d.budget.host_memory_bytes, 4 * MB);
        assert_eq!(d.cpu, GuestLimits::default().cpu);

        let asks = TaskLimits {
            wall_ms: Some(5_000),
            max_model_requests: Some(3),
            ..TaskLimits::default()
        };
        let limits = policy.for_task(&asks).unwrap();
        assert_eq!(limits.wall, Duration::from_secs(5));
        assert_eq!(limits.budget.model_requests, 3);

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
