//! One `cchat_send` against the model (DESIGN §3.5); entry point
//! [`run_send`] ([`run_tool_loop`] is the automatic loop with no guest
//! tools and the provider's defaults).
//!
//! With [`SendMode::Auto`], the loop:
//! 1. sends the messages with the session's tools injected (the MCP tools
//!    its policy allows and its guest tools);
//! 2. runs every tool call of the answer (MCP calls concurrently within
//!    each server's limits, re-checking policy; guest tools one at a time
//!    through the guest's dispatcher) and appends one `tool` message per
//!    `tool_call_id`, always: an error is a result the model can recover
//!    from;
//! 3. repeats until the model answers without calls, or a limit is reached.
//!
//! With [`SendMode::Once`] it makes one request and returns: the answer's
//! tool calls are the guest's to run or refuse ([`LoopOutcome::pending`]).
//! [`SendMode::NoTools`] is one request with no tools offered.
//!
//! The session's `tool_choice` applies to the first request only (a forced
//! call on every request would never let the model answer). An answer the
//! output-token limit cut (`length` / `max_tokens`) is the final answer
//! when it is text; when it holds tool calls their arguments may be cut
//! too, so none is run, the answer is not kept, and the send ends with
//! [`LoopError::CutToolCall`].
//!
//! Whatever ends the loop, the history stays valid for the provider: every
//! tool call of an assistant message is answered (in `Once` mode, by the
//! guest before its next send). Every model request, token, tool call and
//! byte of history is counted in the run's [`RunBudget`].

use std::time::{Duration, Instant};
use tracing::Instrument;

use spear_guest::request::{RequestParams, ToolChoice, ToolMode};

use super::budget::{BudgetError, RunBudget};
use super::guest_tools::{GuestCallbacks, GuestStopped, GuestTools, NoCallbacks};
use super::run_calls::run_calls;
use crate::llm::{
    ChatMessage, ChatRequest, LlmBackend, LlmError, StopReason, ToolCall, ToolSpec, Usage,
};
use crate::policy::{SessionPolicy, TaskPolicy};
use crate::tools::{Router, ToolRef, ToolSet};

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
    /// The MCP server and tool that ran, if one did.
    pub executed: Option<ToolRef>,
    /// The guest tool that ran, if one did.
    pub guest_tool: Option<String>,
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
    #[error("the model reached its output-token limit while writing a tool call, so no call of that answer was run; ask for less per answer or raise max_tokens")]
    CutToolCall,
    /// A request param this send cannot honour (`EINVAL`), before any
    /// request was made.
    #[error("{0}")]
    Params(String),
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    GuestStopped(#[from] GuestStopped),
}

/// How a send treats the model's tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// Run them, and ask again, until the model answers.
    Auto,
    /// One request; the calls come back to the guest.
    Once,
    /// One request with no tools offered.
    NoTools,
}

/// What one send works with.
pub struct SendSetup<'a> {
    pub backend: &'a dyn LlmBackend,
    pub router: &'a Router,
    pub task: &'a TaskPolicy,
    pub policy: &'a SessionPolicy,
    pub params: &'a RequestParams,
    pub guest_tools: &'a GuestTools,
    pub mode: SendMode,
    pub limits: LoopLimits,
}

/// What one send produced.
#[derive(Debug)]
pub struct LoopOutcome {
    /// The model's final text, or why there is none.
    pub result: Result<String, LoopError>,
    pub usage: Usage,
    pub trace: Vec<CallTrace>,
    pub iterations: u32,
    /// How long each model request took (for the node's latency metric).
    pub model_latency: Vec<Duration>,
    /// Why the model's last answer ended.
    pub stop: StopReason,
    /// The MCP tools offered (to resolve guest-driven calls against).
    pub offered: ToolSet,
    /// `Once` mode: the last answer's tool calls, for the guest.
    pub pending: Vec<ToolCall>,
}

/// The automatic loop with the provider's defaults and no guest tools.
pub async fn run_tool_loop(
    backend: &dyn LlmBackend,
    router: &Router,
    task: &TaskPolicy,
    session: &SessionPolicy,
    messages: &mut Vec<ChatMessage>,
    limits: LoopLimits,
    budget: &mut RunBudget,
) -> LoopOutcome {
    let setup = SendSetup {
        backend,
        router,
        task,
        policy: session,
        params: &RequestParams::UNSET,
        guest_tools: &GuestTools::default(),
        mode: SendMode::Auto,
        limits,
    };
    run_send(&setup, messages, budget, &mut NoCallbacks).await
}

/// Runs one send; see the module docs. Every assistant and tool message is
/// appended to `messages`, each charged to `budget` before it is kept.
pub async fn run_send(
    setup: &SendSetup<'_>,
    messages: &mut Vec<ChatMessage>,
    budget: &mut RunBudget,
    guest: &mut dyn GuestCallbacks,
) -> LoopOutcome {
    let set = if setup.mode == SendMode::NoTools {
        ToolSet::default()
    } else {
        setup.router.tool_set(setup.task, setup.policy).await
    };
    let mut outcome = LoopOutcome {
        result: Err(LoopError::Deadline),
        usage: Usage::default(),
        trace: Vec::new(),
        iterations: 0,
        model_latency: Vec::new(),
        stop: StopReason::default(),
        offered: ToolSet::default(),
        pending: Vec::new(),
    };
    let mut tools: Vec<ToolSpec> = Vec::new();
    if setup.mode != SendMode::NoTools {
        tools.extend(setup.guest_tools.specs());
        tools.extend(set.tools.iter().map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: serde_json::Value::Object((*t.input_schema).clone()),
        }));
    }
    let first = match first_params(setup.params, &set, setup.guest_tools, &tools) {
        Ok(params) => params,
        Err(why) => {
            outcome.result = Err(LoopError::Params(why));
            return outcome;
        }
    };
    if let Err(unsupported) = setup.backend.check(&first) {
        outcome.result = Err(LoopError::Params(unsupported.to_string()));
        return outcome;
    }
    // Later requests of the loop let the model choose.
    let mut later = first.clone();
    if matches!(
        later.tool_choice,
        Some(ToolChoice::Named { .. } | ToolChoice::Mode(ToolMode::Required))
    ) {
        later.tool_choice = None;
    }
    let limits = setup.limits;
    let max_iterations = match setup.mode {
        SendMode::Auto => limits.max_iterations,
        SendMode::Once | SendMode::NoTools => 1,
    };
    let mut calls_made: u32 = 0;
    loop {
        if outcome.iterations >= max_iterations {
            outcome.result = Err(LoopError::MaxIterations(max_iterations));
            break;
        }
        let Some(left) = limits.deadline.checked_duration_since(Instant::now()) else {
            outcome.result = Err(LoopError::Deadline);
            break;
        };
        if let Err(spent) = budget.take_request() {
            outcome.result = Err(spent.into());
            break;
        }
        let params = if outcome.iterations == 0 {
            &first
        } else {
            &later
        };
        outcome.iterations += 1;
        let request = ChatRequest {
            messages,
            tools: &tools,
            params,
        };
        let asked = std::time::Instant::now();
        // OpenTelemetry GenAI conventions: `chat {model}`, a client span.
        let model = setup.backend.model();
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {model}"),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = setup.backend.provider(),
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
        );
        let answered = tokio::time::timeout(left, setup.backend.complete(request))
            .instrument(span.clone())
            .await;
        outcome.model_latency.push(asked.elapsed());
        if let Ok(Ok(reply)) = &answered {
            span.record("gen_ai.usage.input_tokens", reply.usage.prompt_tokens);
            span.record("gen_ai.usage.output_tokens", reply.usage.completion_tokens);
        }
        let reply = match answered {
            Err(_) => {
                outcome.result = Err(LoopError::Deadline);
                break;
            }
            Ok(Err(error)) => {
                outcome.result = Err(LoopError::Llm(error));
                break;
            }
            Ok(Ok(reply)) => reply,
        };
        outcome.usage += reply.usage;
        outcome.stop = reply.stop;
        budget.add_tokens(reply.usage.prompt_tokens + reply.usage.completion_tokens);
        if reply.stop == StopReason::MaxTokens && !reply.message.tool_calls.is_empty() {
            outcome.result = Err(LoopError::CutToolCall);
            break;
        }
        // Not kept when it does not fit: the history stays valid without it.
        if let Err(full) = budget.charge_memory(reply.message.footprint()) {
            outcome.result = Err(full.into());
            break;
        }
        let calls = reply.message.tool_calls.clone();
        let text = reply.message.content.clone().unwrap_or_default();
        messages.push(reply.message);
        if calls.is_empty() {
            outcome.result = Ok(text);
            break;
        }
        if setup.mode != SendMode::Auto {
            outcome.pending = calls;
            outcome.result = Ok(text);
            break;
        }
        let per_send = limits.max_total_tool_calls.saturating_sub(calls_made);
        match run_calls(
            setup,
            &set,
            &calls,
            per_send,
            messages,
            budget,
            guest,
            &mut outcome.trace,
        )
        .await
        {
            Ok(ran) => calls_made += ran,
            Err(error) => {
                outcome.result = Err(error);
                break;
            }
        }
    }
    outcome.offered = set;
    outcome
}

/// The params of a send's first request: `tool_choice` checked against
/// the tools offered, a named tool renamed to the name the model sees.
fn first_params(
    params: &RequestParams,
    set: &ToolSet,
    guest_tools: &GuestTools,
    tools: &[ToolSpec],
) -> Result<RequestParams, String> {
    let mut first = params.clone();
    match &params.tool_choice {
        Some(ToolChoice::Mode(ToolMode::Required)) if tools.is_empty() => {
            return Err("tool_choice is required but this send offers no tools".into());
        }
        Some(ToolChoice::Named { name }) => {
            let offered = if guest_tools.find(name).is_some() && !tools.is_empty() {
                Some(name.clone())
            } else {
                set.offered.resolve(name).ok().and_then(|target| {
                    set.tools
                        .iter()
                        .find(|t| t.server_id == target.server && t.tool == target.tool)
                        .map(|t| t.name.clone())
                })
            };
            let Some(offered) = offered else {
                let shown = spear_common::text::prefix(name, 64);
                return Err(format!(
                    "tool_choice names '{shown}', which this send does not offer"
                ));
            };
            first.tool_choice = Some(ToolChoice::Named { name: offered });
        }
        _ => {}
    }
    Ok(first)
}
