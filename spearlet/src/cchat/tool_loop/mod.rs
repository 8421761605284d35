//! One `cchat_send` against the model (docs/guest-api.md); entry point
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
//! With tool search (`mcp.tool_search`, [`crate::tools::search`]) the
//! MCP tools offered start as the search tool alone (plus the tools the
//! session obtained in earlier sends); a search call is answered by the
//! node, in the `RunCalls` branch like any call, and the tools it finds are
//! offered from the next `Ask` on. On a backend that searches natively
//! (`tool_search = "native"`, Anthropic) every tool the session may use is
//! sent deferred instead, the provider searches them, and the tools its
//! searches referenced are the ones the model obtained (`ask.rs`): callable
//! in that same answer, as the provider loaded them for it.
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
//!
//! ## The state machine
//! [`run_send`] prepares a [`ToolLoop`] (the tools offered, the first
//! request's params) and drives it one [`Step`] at a time until `Done`:
//!
//! ```text
//!   Ask ──(answer with calls, Auto)──▶ RunCalls ──(all answered)──▶ Ask
//!    │                                    │
//!    ├─(text answer; Once/NoTools)──▶ Done ◀─(a budget or limit refused
//!    └─(limit, deadline, budget,           a call; the guest stopped)
//!       provider error, cut call)──▶ Done
//! ```
//!
//! `ask.rs` is the `Ask` branch (one model request and what its answer
//! leads to), `calls.rs` the `RunCalls` branch. Each takes the loop's
//! state and returns the next step, so a new branch (an approval to wait
//! for, an audit record to write) is one more variant and one method.
//! Time is tokio's: the tests run the transitions with the clock paused.

mod ask;
mod calls;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use spear_guest::request::{RequestParams, ToolChoice, ToolMode};

use super::budget::{BudgetError, RunBudget};
use super::guest_tools::{GuestCallbacks, GuestStopped, GuestTools, NoCallbacks};
use crate::llm::{
    ChatMessage, LlmBackend, LlmError, StopReason, ToolCall, ToolSpec, Unsupported, Usage,
};
use crate::tool_policy::{SessionPolicy, TaskPolicy};
use crate::tools::search::{searches, Search, MAX_LOADED, SEARCH_TOOL};
use crate::tools::{Router, ToolRef, ToolSet};
use spear_guest::reply::SearchTrace;

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
    /// A search of the session's tools: the query and what it found.
    pub search: Option<SearchTrace>,
    /// Why the call did not run, when it did not: what the model read
    /// (a denial with its reason, an expiry, a policy refusal).
    pub refused: Option<String>,
}

/// How much of a refusal a trace keeps.
const REFUSAL_KEPT: usize = 512;

impl CallTrace {
    /// The refusal to keep for a call answered `text`: only when no tool
    /// ran and the answer is an error.
    pub fn refusal(
        executed: Option<&ToolRef>,
        guest_tool: Option<&String>,
        is_error: bool,
        text: &str,
    ) -> Option<String> {
        (executed.is_none() && guest_tool.is_none() && is_error)
            .then(|| spear_common::text::prefix(text, REFUSAL_KEPT).to_string())
    }
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
    #[error(transparent)]
    Params(#[from] ParamsRefused),
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    GuestStopped(#[from] GuestStopped),
    /// The node's audit log refuses records: the run ends before the
    /// model sees anything it would not have recorded.
    #[error(transparent)]
    Unrecorded(#[from] crate::trust::audit::Unwritable),
    /// A fleet quota refused a model request: the run ends (stop reason
    /// `quota`).
    #[error("the model request was not made: {0}")]
    Quota(Box<crate::trust::ModelQuotaRefused>),
}

/// Why a send's params cannot be honoured.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ParamsRefused {
    #[error("tool_choice is required but this send offers no tools")]
    RequiredWithoutTools,
    #[error("tool_choice names '{0}', which this send does not offer")]
    NotOffered(String),
    /// The backend's provider cannot honour one.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
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
    /// What its requests cost.
    pub prices: &'a crate::llm::Prices,
    pub router: &'a Router,
    pub task: &'a TaskPolicy,
    pub policy: &'a SessionPolicy,
    pub params: &'a RequestParams,
    pub guest_tools: &'a GuestTools,
    pub mode: SendMode,
    pub limits: LoopLimits,
    /// The session's search so far (the tools it obtained), if any.
    pub search: Option<&'a Search>,
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
    /// The send's tool search, when it searched: the session keeps it
    /// for its next send and for guest-driven search calls.
    pub search: Option<Search>,
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
        prices: crate::llm::Prices::none(),
        router,
        task,
        policy: session,
        params: &RequestParams::UNSET,
        guest_tools: &GuestTools::default(),
        mode: SendMode::Auto,
        limits,
        search: None,
    };
    run_send(&setup, messages, budget, &mut NoCallbacks).await
}

/// What the loop does next.
#[derive(Debug)]
pub(super) enum Step {
    /// Ask the model, with the history as it stands.
    Ask,
    /// Run the tool calls of the answer just kept, and answer each.
    RunCalls(Vec<ToolCall>),
    /// The send is over: the model's final text, or why there is none.
    Done(Result<String, LoopError>),
}

/// One send in progress: what it offers, what it has used, and what it has
/// produced so far.
pub(super) struct ToolLoop<'s, 'm> {
    setup: &'s SendSetup<'s>,
    /// The MCP tools the model may call now: under the session's policy,
    /// and with search, the ones it obtained.
    set: ToolSet,
    /// Tool search, when this send searches.
    search: Option<Search>,
    /// The provider searches (its tool search over deferred tools), not
    /// the node's search tool.
    native: bool,
    /// Every tool the model sees (guest tools first).
    tools: Vec<ToolSpec>,
    /// The first request's params; `later` lets the model choose.
    first: RequestParams,
    later: RequestParams,
    /// Requests this send may make (1 unless `Auto`).
    max_iterations: u32,
    /// Tool calls run in this send so far.
    calls_made: u32,
    messages: &'m mut Vec<ChatMessage>,
    budget: &'m mut RunBudget,
    guest: &'m mut dyn GuestCallbacks,
    outcome: LoopOutcome,
}

/// Runs one send; see the module docs. Every assistant and tool message is
/// appended to `messages`, each charged to `budget` before it is kept.
pub async fn run_send(
    setup: &SendSetup<'_>,
    messages: &mut Vec<ChatMessage>,
    budget: &mut RunBudget,
    guest: &mut dyn GuestCallbacks,
) -> LoopOutcome {
    let all = if setup.mode == SendMode::NoTools {
        ToolSet::default()
    } else {
        setup.router.tool_set(setup.task, setup.policy).await
    };
    let mut send = match ToolLoop::new(setup, all, messages, budget, guest) {
        Ok(send) => send,
        Err(refused) => return *refused,
    };
    let mut step = Step::Ask;
    loop {
        step = match step {
            Step::Ask => send.ask().await,
            Step::RunCalls(calls) => send.run_calls(calls).await,
            Step::Done(result) => return send.finish(result),
        };
    }
}

impl<'s, 'm> ToolLoop<'s, 'm> {
    /// The send ready for its first request, or its outcome when its
    /// params cannot be honoured (no request is made then).
    fn new(
        setup: &'s SendSetup<'s>,
        all: ToolSet,
        messages: &'m mut Vec<ChatMessage>,
        budget: &'m mut RunBudget,
        guest: &'m mut dyn GuestCallbacks,
    ) -> Result<Self, Box<LoopOutcome>> {
        let native = setup.backend.searches_natively();
        let (set, search) = if searches(setup.policy.tool_search, &all) {
            let keep = if native { usize::MAX } else { MAX_LOADED };
            let mut search = Search::begin(all, setup.search, keep);
            // A tool the guest names in tool_choice is obtained for it.
            if let Some(ToolChoice::Named { name }) = &setup.params.tool_choice {
                let all = search.all();
                let named = all.offered.resolve(name).ok().and_then(|t| all.name_of(t));
                if let Some(named) = named.map(str::to_string) {
                    search.load(&named);
                }
            }
            (search.visible(), Some(search))
        } else {
            (all, None)
        };
        let native = native && search.is_some();
        let tools = specs(setup, search.as_ref(), native, &set);
        let first = first_params(setup.params, &set, setup.guest_tools, &tools).and_then(|first| {
            setup.backend.check(&first)?;
            Ok(first)
        });
        let first = match first {
            Ok(first) => first,
            Err(refused) => {
                let refused = Err(LoopError::Params(refused));
                return Err(Box::new(LoopOutcome::ended(refused, ToolSet::default())));
            }
        };
        let mut later = first.clone();
        if matches!(
            later.tool_choice,
            Some(ToolChoice::Named { .. } | ToolChoice::Mode(ToolMode::Required))
        ) {
            later.tool_choice = None;
        }
        let max_iterations = match setup.mode {
            SendMode::Auto => setup.limits.max_iterations,
            SendMode::Once | SendMode::NoTools => 1,
        };
        Ok(ToolLoop {
            setup,
            set,
            search,
            native,
            tools,
            first,
            later,
            max_iterations,
            calls_made: 0,
            messages,
            budget,
            guest,
            outcome: LoopOutcome::ended(Err(LoopError::Deadline), ToolSet::default()),
        })
    }

    /// The outcome, with `result` and the tools that were offered.
    fn finish(mut self, result: Result<String, LoopError>) -> LoopOutcome {
        self.outcome.result = result;
        self.outcome.offered = self.set;
        self.outcome.search = self.search;
        self.outcome
    }

    /// Offers the tools the searches of the last calls obtained.
    fn offer_found(&mut self) {
        if let Some(search) = &self.search {
            self.set = search.visible();
            self.tools = specs(self.setup, Some(search), self.native, &self.set);
        }
    }
}

/// Every tool the model sees: the guest's first, then the node's search
/// tool when the send searches, then the MCP tools of `set`; or, when the
/// provider searches (`native`), every MCP tool the session may use,
/// deferred, in every request: the provider loads the ones its searches
/// referenced from the history, and the list never changes (its cache).
fn specs(
    setup: &SendSetup<'_>,
    search: Option<&Search>,
    native: bool,
    set: &ToolSet,
) -> Vec<ToolSpec> {
    let mut tools: Vec<ToolSpec> = Vec::new();
    if setup.mode == SendMode::NoTools {
        return tools;
    }
    tools.extend(setup.guest_tools.specs());
    let spec = |t: &crate::tools::OfferedTool, deferred| ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: serde_json::Value::Object((*t.input_schema).clone()),
        deferred,
    };
    match search {
        Some(search) if native => tools.extend(search.all().tools.iter().map(|t| spec(t, true))),
        _ => {
            tools.extend(search.map(Search::spec));
            tools.extend(set.tools.iter().map(|t| spec(t, false)));
        }
    }
    tools
}

impl LoopOutcome {
    fn ended(result: Result<String, LoopError>, offered: ToolSet) -> Self {
        LoopOutcome {
            result,
            usage: Usage::default(),
            trace: Vec::new(),
            iterations: 0,
            model_latency: Vec::new(),
            stop: StopReason::default(),
            offered,
            pending: Vec::new(),
            search: None,
        }
    }
}

/// The params of a send's first request: `tool_choice` checked against
/// the tools offered, a named tool renamed to the name the model sees.
fn first_params(
    params: &RequestParams,
    set: &ToolSet,
    guest_tools: &GuestTools,
    tools: &[ToolSpec],
) -> Result<RequestParams, ParamsRefused> {
    let mut first = params.clone();
    match &params.tool_choice {
        Some(ToolChoice::Mode(ToolMode::Required)) if tools.is_empty() => {
            return Err(ParamsRefused::RequiredWithoutTools);
        }
        Some(ToolChoice::Named { name }) => {
            let own = guest_tools.find(name).is_some() || name == SEARCH_TOOL;
            let offered = if own && tools.iter().any(|t| &t.name == name) {
                Some(name.clone())
            } else {
                set.offered
                    .resolve(name)
                    .ok()
                    .and_then(|target| set.name_of(target))
                    .map(str::to_string)
            };
            let Some(offered) = offered else {
                let shown = spear_common::text::prefix(name, 64);
                return Err(ParamsRefused::NotOffered(shown.to_string()));
            };
            first.tool_choice = Some(ToolChoice::Named { name: offered });
        }
        _ => {}
    }
    Ok(first)
}
