//! What one guest run may cost the node, summed over every session and
//! every `cchat_send` of the run (docs/guest-api.md, "Limits of a run").
//!
//! [`RunBudget`] is owned by the run's host state and lent (`&mut`) to the
//! tool loop, so one counter sees everything: host memory kept for the guest
//! (messages, histories, tool results, replies, the trace), model requests,
//! tokens as the provider reports them, and tool calls.
//!
//! A refusal is first an error the guest can handle (`-ENOMEM` for host
//! memory, `-EDQUOT` for the other budgets). A guest that runs into the same
//! budget again after being told has its run stopped with that budget as
//! the reason ([`Strike`]): a hostile guest cannot spin on refusals.

use std::fmt;

/// The budgets a run is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    HostMemory,
    ModelRequests,
    Tokens,
    ToolCalls,
}

impl BudgetKind {
    const ALL: [BudgetKind; 4] = [
        BudgetKind::HostMemory,
        BudgetKind::ModelRequests,
        BudgetKind::Tokens,
        BudgetKind::ToolCalls,
    ];

    /// The task config key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            BudgetKind::HostMemory => "limits.host_memory_mb",
            BudgetKind::ModelRequests => "limits.max_model_requests",
            BudgetKind::Tokens => "limits.max_tokens",
            BudgetKind::ToolCalls => "limits.max_tool_calls",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A budget that had no room left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub struct BudgetError {
    pub kind: BudgetKind,
    pub limit: u64,
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            BudgetKind::HostMemory => format!("host-memory budget of {} bytes", self.limit),
            BudgetKind::ModelRequests => format!("budget of {} model requests", self.limit),
            BudgetKind::Tokens => format!("budget of {} tokens", self.limit),
            BudgetKind::ToolCalls => format!("budget of {} tool calls", self.limit),
        };
        write!(f, "the run's {what} is spent ({})", self.kind.key())
    }
}

/// The limits of a run; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    pub host_memory_bytes: u64,
    pub model_requests: u64,
    pub tokens: u64,
    pub tool_calls: u64,
}

impl BudgetLimits {
    /// No limit at all: for benchmarks and tests of other things.
    pub const UNLIMITED: BudgetLimits = BudgetLimits {
        host_memory_bytes: u64::MAX,
        model_requests: u64::MAX,
        tokens: u64::MAX,
        tool_calls: u64::MAX,
    };

    fn of(&self, kind: BudgetKind) -> u64 {
        match kind {
            BudgetKind::HostMemory => self.host_memory_bytes,
            BudgetKind::ModelRequests => self.model_requests,
            BudgetKind::Tokens => self.tokens,
            BudgetKind::ToolCalls => self.tool_calls,
        }
    }
}

/// What a refusal means for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strike {
    /// The first time: the guest is told and may recover.
    Told(BudgetError),
    /// Again after being told: the run is stopped.
    Stop(BudgetError),
}

/// The run's counters; see the module docs.
#[derive(Debug)]
pub struct RunBudget {
    limits: BudgetLimits,
    used: [u64; 4],
    told: [bool; 4],
}

impl RunBudget {
    pub fn new(limits: BudgetLimits) -> Self {
        Self {
            limits,
            used: [0; 4],
            told: [false; 4],
        }
    }

    pub fn unlimited() -> Self {
        Self::new(BudgetLimits::UNLIMITED)
    }

    pub fn used(&self, kind: BudgetKind) -> u64 {
        self.used[kind.index()]
    }

    fn error(&self, kind: BudgetKind) -> BudgetError {
        BudgetError {
            kind,
            limit: self.limits.of(kind),
        }
    }

    /// Takes `amount` of `kind` if it fits; nothing is taken otherwise.
    fn take(&mut self, kind: BudgetKind, amount: u64) -> Result<(), BudgetError> {
        let used = &mut self.used[kind.index()];
        match used.checked_add(amount) {
            Some(total) if total <= self.limits.of(kind) => {
                *used = total;
                Ok(())
            }
            _ => Err(self.error(kind)),
        }
    }

    /// Host memory about to be kept for the guest, checked before the host
    /// allocates (or keeps) it.
    pub fn charge_memory(&mut self, bytes: usize) -> Result<(), BudgetError> {
        self.take(BudgetKind::HostMemory, bytes as u64)
    }

    /// Host memory kept without a check: only for things bounded by
    /// another budget (trace entries) or a short note saying a result was
    /// not kept.
    pub fn keep_memory(&mut self, bytes: usize) {
        let used = &mut self.used[BudgetKind::HostMemory.index()];
        *used = used.saturating_add(bytes as u64);
    }

    /// Host memory no longer kept (a closed session, a replaced reply).
    pub fn release_memory(&mut self, bytes: usize) {
        let used = &mut self.used[BudgetKind::HostMemory.index()];
        *used = used.saturating_sub(bytes as u64);
    }

    /// One model request, before it is sent. Tokens are checked here too:
    /// a request is only sent while the run has tokens left.
    pub fn take_request(&mut self) -> Result<(), BudgetError> {
        if self.used(BudgetKind::Tokens) >= self.limits.tokens {
            return Err(self.error(BudgetKind::Tokens));
        }
        self.take(BudgetKind::ModelRequests, 1)
    }

    /// Tokens the provider reports for a request (they are spent already,
    /// so they are always counted; the next request is refused).
    pub fn add_tokens(&mut self, tokens: u64) {
        let used = &mut self.used[BudgetKind::Tokens.index()];
        *used = used.saturating_add(tokens);
    }

    /// Up to `wanted` tool calls; returns how many the budget allows.
    pub fn take_tool_calls(&mut self, wanted: usize) -> usize {
        let left = self.limits.tool_calls - self.used(BudgetKind::ToolCalls);
        let granted = (wanted as u64).min(left);
        self.used[BudgetKind::ToolCalls.index()] += granted;
        granted as usize
    }

    /// The tool-call budget's error, for calls it did not allow.
    pub fn tool_calls_spent(&self) -> BudgetError {
        self.error(BudgetKind::ToolCalls)
    }

    /// Records a refusal: the first of its kind is [`Strike::Told`], any
    /// later one [`Strike::Stop`].
    pub fn strike(&mut self, error: BudgetError) -> Strike {
        let told = &mut self.told[error.kind.index()];
        if *told {
            Strike::Stop(error)
        } else {
            *told = true;
            Strike::Told(error)
        }
    }

    /// Counters for the run's report: `(kind, used, limit)`.
    pub fn report(&self) -> Vec<(BudgetKind, u64, u64)> {
        BudgetKind::ALL
            .iter()
            .map(|&kind| (kind, self.used(kind), self.limits.of(kind)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> RunBudget {
        RunBudget::new(BudgetLimits {
            host_memory_bytes: 100,
            model_requests: 2,
            tokens: 50,
            tool_calls: 3,
        })
    }

    #[test]
    fn memory_is_checked_before_it_is_kept_and_freed_again() {
        let mut budget = small();
        budget.charge_memory(60).unwrap();
        let error = budget.charge_memory(41).unwrap_err();
        assert_eq!(error.kind, BudgetKind::HostMemory);
        assert_eq!(
            budget.used(BudgetKind::HostMemory),
            60,
            "a refusal takes nothing"
        );
        budget.release_memory(60);
        budget.charge_memory(100).unwrap();
        assert!(budget.charge_memory(usize::MAX).is_err(), "no overflow");
    }

    #[test]
    fn requests_and_tokens_sum_over_the_run() {
        let mut budget = small();
        budget.take_request().unwrap();
        budget.add_tokens(30);
        budget.take_request().unwrap();
        let error = budget.take_request().unwrap_err();
        assert_eq!(error.kind, BudgetKind::ModelRequests);
        assert!(
            error.to_string().contains("limits.max_model_requests"),
            "{error}"
        );

        let mut budget = small();
        budget.take_request().unwrap();
        budget.add_tokens(80);
        assert_eq!(budget.take_request().unwrap_err().kind, BudgetKind::Tokens);
    }

    #[test]
    fn tool_calls_are_granted_up_to_what_is_left() {
        let mut budget = small();
        assert_eq!(budget.take_tool_calls(2), 2);
        assert_eq!(budget.take_tool_calls(5), 1);
        assert_eq!(budget.take_tool_calls(1), 0);
    }

    #[test]
    fn a_guest_is_told_once_then_stopped() {
        let mut budget = small();
        let error = budget.charge_memory(1000).unwrap_err();
        assert_eq!(budget.strike(error), Strike::Told(error));
        assert_eq!(budget.strike(error), Strike::Stop(error));
        // Other budgets have their own first warning.
        let other = budget.tool_calls_spent();
        assert_eq!(budget.strike(other), Strike::Told(other));
    }
}
