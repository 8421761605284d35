//! The auto tool-call loop (DESIGN §3.5).
//!
//! 1. send the messages with the session's tools injected;
//! 2. run every tool call of the answer (concurrently, within each server's
//!    limits), re-checking policy, and append one `tool` message per
//!    `tool_call_id`, always: an error is a result the model can recover from;
//! 3. repeat until the model answers without calls, or a limit is reached.
//!
//! An answer the output-token limit cut (`length` / `max_tokens`) is the
//! final answer when it is text (the reply's `stop_reason` says it is cut);
//! when it holds tool calls their arguments may be cut too, so none is run,
//! the answer is not kept, and the send ends with [`LoopError::CutToolCall`].
//!
//! Whatever ends the loop, the history stays valid for the provider: every
//! tool call of an assistant message is answered.
//!
//! Every model request, token, tool call and byte of history is counted in
//! the run's [`RunBudget`], which spans all sessions and sends of a run.

use std::time::{Duration, Instant};

use super::budget::{BudgetError, RunBudget};
use crate::llm::{ChatMessage, LlmBackend, LlmError, StopReason, ToolSpec, Usage};
use crate::policy::{SessionPolicy, TaskPolicy};
use crate::tools::{Router, ToolRef};

/// Bounds on one `cchat_send`.
#[derive(Debug, Clone, Copy)]
pub struct LoopLimits {
    pub max_iterations: u32,
    pub max_total_tool_calls: u32,
    pub deadline: Instant,
}

/// One executed (or refused) tool call, for the guest and for metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTrace {
    pub tool_call_id: String,
    /// The name the model used.
    pub name: String,
    /// The server and tool that ran, if any did.
    pub executed: Option<ToolRef>,
    pub is_error: bool,
    pub duration: Duration,
    pub bytes: usize,
}

/// Why the loop ended without a final answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoopError {
    #[error("the model did not finish within {0} iterations (max_iterations)")]
    MaxIterations(u32),
    #[error("the model asked for more than {0} tool calls in this send (max_total_tool_calls)")]
    MaxToolCalls(u32),
    #[error("the session deadline passed before the model finished")]
    Deadline,
    #[error("the model reached its output-token limit while writing a tool call, so no call of that answer was run; ask for less per answer or raise the model's max_tokens")]
    CutToolCall,
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    Llm(#[from] LlmError),
}

/// What one run of the loop produced.
#[derive(Debug)]
pub struct LoopOutcome {
    /// The model's final text, or why there is none.
    pub result: Result<String, LoopError>,
    pub usage: Usage,
    pub trace: Vec<CallTrace>,
    pub iterations: u32,
    /// Why the model's last answer ended.
    pub stop: StopReason,
}

/// Runs the loop, appending every assistant and tool message to `messages`
/// (each charged to `budget`'s host memory before it is kept).
pub async fn run_tool_loop(
    backend: &dyn LlmBackend,
    router: &Router,
    task: &TaskPolicy,
    session: &SessionPolicy,
    messages: &mut Vec<ChatMessage>,
    limits: LoopLimits,
    budget: &mut RunBudget,
) -> LoopOutcome {
    let set = router.tool_set(task, session).await;
    let tools: Vec<ToolSpec> = set
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: serde_json::Value::Object((*t.input_schema).clone()),
        })
        .collect();
    let mut outcome = LoopOutcome {
        result: Err(LoopError::Deadline),
        usage: Usage::default(),
        trace: Vec::new(),
        iterations: 0,
        stop: StopReason::default(),
    };
    let mut calls_made: u32 = 0;
    loop {
        if outcome.iterations >= limits.max_iterations {
            outcome.result = Err(LoopError::MaxIterations(limits.max_iterations));
            return outcome;
        }
        let Some(left) = limits.deadline.checked_duration_since(Instant::now()) else {
            outcome.result = Err(LoopError::Deadline);
            return outcome;
        };
        if let Err(spent) = budget.take_request() {
            outcome.result = Err(spent.into());
            return outcome;
        }
        outcome.iterations += 1;
        let reply = match tokio::time::timeout(left, backend.complete(messages, &tools)).await {
            Err(_) => {
                outcome.result = Err(LoopError::Deadline);
                return outcome;
            }
            Ok(Err(error)) => {
                outcome.result = Err(LoopError::Llm(error));
                return outcome;
            }
            Ok(Ok(reply)) => reply,
        };
        outcome.usage += reply.usage;
        outcome.stop = reply.stop;
        budget.add_tokens(reply.usage.prompt_tokens + reply.usage.completion_tokens);
        if reply.stop == StopReason::MaxTokens && !reply.message.tool_calls.is_empty() {
            outcome.result = Err(LoopError::CutToolCall);
            return outcome;
        }
        // Not kept when it does not fit: the history stays valid without it.
        if let Err(full) = budget.charge_memory(reply.message.footprint()) {
            outcome.result = Err(full.into());
            return outcome;
        }
        let calls = reply.message.tool_calls.clone();
        messages.push(reply.message.clone());
        if calls.is_empty() {
            outcome.result = Ok(reply.message.content.unwrap_or_default());
            return outcome;
        }
        // Run what both budgets allow, concurrently; answer the rest too.
        let per_send = limits.max_total_tool_calls.saturating_sub(calls_made) as usize;
        let allowed = budget.take_tool_calls(calls.len().min(per_send));
        let (run, refused) = calls.split_at(allowed);
        let refusal = if allowed < calls.len().min(per_send) {
            LoopError::Budget(budget.tool_calls_spent())
        } else {
            LoopError::MaxToolCalls(limits.max_total_tool_calls)
        };
        let mut out_of_memory = None;
        let deadline = limits.deadline;
        let set = &set;
        let results = futures::future::join_all(run.iter().map(|call| async move {
            let started = Instant::now();
            let left = deadline.saturating_duration_since(started);
            let executed = tokio::time::timeout(
                left,
                router.execute(task, session, set, &call.name, &call.arguments),
            )
            .await;
            (call, started.elapsed(), executed)
        }))
        .await;
        for (call, duration, executed) in results {
            let (mut text, mut is_error, ran) = match executed {
                Ok(o) => (o.text, o.is_error, o.executed),
                Err(_) => (
                    "the tool call was cut short by the session deadline".to_string(),
                    true,
                    None,
                ),
            };
            let message = ChatMessage::tool(&call.id, String::new());
            if let Err(full) = budget.charge_memory(message.footprint() + text.len()) {
                // The call is still answered (a short note, charged past
                // the budget: its size is bounded), and the loop ends.
                text = format!("result not kept: {full}");
                is_error = true;
                out_of_memory = Some(full);
            }
            outcome.trace.push(CallTrace {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                executed: ran,
                is_error,
                duration,
                bytes: text.len(),
            });
            messages.push(ChatMessage::tool(&call.id, text));
        }
        for call in refused {
            let text = format!("not executed: {refusal}");
            outcome.trace.push(CallTrace {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                executed: None,
                is_error: true,
                duration: Duration::ZERO,
                bytes: text.len(),
            });
            messages.push(ChatMessage::tool(&call.id, text));
        }
        calls_made += run.len() as u32;
        if let Some(full) = out_of_memory {
            outcome.result = Err(full.into());
            return outcome;
        }
        if !refused.is_empty() {
            outcome.result = Err(refusal);
            return outcome;
        }
    }
}
