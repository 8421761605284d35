//! `cchat_send` in three steps, so the host API can lend the guest's store
//! to guest tool callbacks while the send runs:
//! [`Sessions::begin_send`] takes the session and the run's budget out of
//! [`Sessions`] (which then refuses every cchat call with `EBUSY`),
//! [`SendJob::run`] drives the model ([`super::run_send`]), and
//! [`Sessions::finish_send`] puts them back and keeps the reply for
//! `cchat_recv`, whatever the outcome.

use std::time::{Duration, Instant};

use spear_guest::calls::RequestedCall;
use spear_guest::errno::{EBADMSG, EINVAL, EIO, ETIMEDOUT};
use spear_guest::params::send_flags;
use spear_guest::reply::{Reply, ToolCall, Usage};
use spear_guest::request::ResponseFormat;

use super::guest_tools::GuestCallbacks;
use super::history;
use super::sessions::{CallError, Session, Sessions};
use super::tool_loop::{run_send, LoopOutcome, SendMode, SendSetup};
use super::{BudgetKind, CallTrace, LoopError, LoopLimits, RunBudget};
use crate::tool_policy::TaskPolicy;
use crate::tools::Router;

/// Host bytes charged per entry of the run's tool-call trace.
pub(super) const TRACE_COST: usize = 256;

/// A send under way: the session and the budget, out of [`Sessions`].
pub struct SendJob {
    handle: i32,
    session: Session,
    budget: RunBudget,
    /// Host memory the run used when the send began.
    used_before: u64,
    task: TaskPolicy,
    router: Router,
    mode: SendMode,
    limits: LoopLimits,
}

impl SendJob {
    /// Runs the send, calling guest tools through `guest`.
    pub async fn run(&mut self, guest: &mut dyn GuestCallbacks) -> LoopOutcome {
        let session = &mut self.session;
        let setup = SendSetup {
            backend: session.chosen.backend.as_ref(),
            prices: &session.chosen.prices,
            router: &self.router,
            task: &self.task,
            policy: &session.policy,
            params: &session.params,
            guest_tools: &session.guest_tools,
            mode: self.mode,
            limits: self.limits,
            search: session.search.as_ref(),
        };
        run_send(&setup, &mut session.messages, &mut self.budget, guest).await
    }
}

impl Sessions {
    /// Checks the send and takes what it needs out; see the module docs.
    pub fn begin_send(&mut self, handle: i32, flags: u32) -> Result<SendJob, CallError> {
        self.not_in_callback("cchat_send")?;
        if flags & !send_flags::ALL != 0 {
            return Err(CallError::refused(
                EINVAL,
                format!("cchat_send flags {flags:#x} have bits the node does not know; bit 0 is automatic tool calls, bit 1 no tools"),
            ));
        }
        let mode = if flags & send_flags::NO_TOOLS != 0 {
            SendMode::NoTools
        } else if flags & send_flags::AUTO_TOOL_CALLS != 0 {
            SendMode::Auto
        } else {
            SendMode::Once
        };
        let session = self
            .sessions
            .get(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        history::check_before_send(&session.messages)?;
        let params = &session.params;
        let limits = self.deps.limits;
        let deadline = match params.timeout_ms {
            Some(ms) => self
                .deps
                .deadline
                .min(Instant::now() + Duration::from_millis(ms)),
            None => self.deps.deadline,
        };
        let loop_limits = LoopLimits {
            max_iterations: params.max_iterations.unwrap_or(limits.max_iterations),
            max_total_tool_calls: params
                .max_total_tool_calls
                .unwrap_or(limits.max_total_tool_calls),
            deadline,
        };
        let session = self
            .sessions
            .remove(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        let budget = std::mem::replace(&mut self.deps.budget, RunBudget::unlimited());
        self.sending = true;
        Ok(SendJob {
            handle,
            session,
            used_before: budget.used(BudgetKind::HostMemory),
            budget,
            task: self.deps.task.clone(),
            router: self.deps.router.clone(),
            mode,
            limits: loop_limits,
        })
    }

    /// Puts the session and budget back and keeps the reply.
    pub fn finish_send(&mut self, job: SendJob, mut outcome: LoopOutcome) -> Result<(), CallError> {
        let SendJob {
            handle,
            mut session,
            budget,
            used_before,
            ..
        } = job;
        // What the loop kept (assistant and tool messages) is the session's.
        let kept = budget
            .used(BudgetKind::HostMemory)
            .saturating_sub(used_before);
        session.charged += kept as usize;
        self.deps.budget = budget;
        self.sending = false;
        session.offered = std::mem::take(&mut outcome.offered);
        if let Some(search) = outcome.search.take() {
            session.search = Some(search);
        }
        let backend = session.chosen.name.clone();
        let model = session.chosen.backend.model().to_string();
        let wants_json = matches!(
            session.params.response_format,
            Some(ResponseFormat::JsonObject | ResponseFormat::JsonSchema { .. })
        );
        self.sessions.insert(handle, session);
        let mut reply = Reply {
            usage: Usage {
                prompt_tokens: outcome.usage.prompt_tokens,
                completion_tokens: outcome.usage.completion_tokens,
            },
            iterations: outcome.iterations,
            stop_reason: outcome.stop,
            backend,
            model,
            trace: trace_of(&outcome.trace),
            tool_calls: outcome
                .pending
                .iter()
                .map(|c| self.requested(handle, c))
                .collect(),
            ..Reply::default()
        };
        let result = match outcome.result {
            Ok(content) => {
                if wants_json && outcome.pending.is_empty() {
                    match serde_json::from_str(&content) {
                        Ok(json) => reply.json = Some(json),
                        Err(e) => {
                            reply.error = Some(format!(
                                "the model's answer is not the JSON response_format asked for: {e}"
                            ))
                        }
                    }
                }
                reply.content = content;
                match &reply.error {
                    Some(sentence) => Err(CallError::refused(EBADMSG, sentence.clone())),
                    None => Ok(()),
                }
            }
            Err(error) => {
                let sentence = error.to_string();
                reply.error = Some(sentence.clone());
                Err(match error {
                    LoopError::Deadline => CallError::refused(ETIMEDOUT, sentence),
                    LoopError::Params(_) => CallError::refused(EINVAL, sentence),
                    LoopError::Budget(spent) => self.refuse(spent),
                    LoopError::Quota(_) => {
                        CallError::Stop(crate::wasm::StopReason::Quota(sentence))
                    }
                    _ => CallError::refused(EIO, sentence),
                })
            }
        };
        self.iterations = self.iterations.saturating_add(outcome.iterations);
        self.model_latency
            .extend(outcome.model_latency.iter().copied());
        // The run's trace is kept for the operator (bounded by the tool-call
        // budget, so charged without a check).
        self.deps
            .budget
            .keep_memory(outcome.trace.len() * TRACE_COST);
        self.trace.extend(outcome.trace);
        self.keep_reply(handle, &reply, result)
    }

    /// A pending call as the guest sees it: for MCP names, the server and
    /// tool it stands for.
    fn requested(&self, handle: i32, call: &crate::llm::ToolCall) -> RequestedCall {
        let session = self.sessions.get(&handle);
        let guest = session.is_some_and(|s| s.guest_tools.find(&call.name).is_some());
        let target = session.and_then(|s| s.offered.offered.resolve(&call.name).ok());
        RequestedCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            server: target.map(|t| t.server.clone()),
            tool: target.map(|t| t.tool.clone()),
            guest,
        }
    }

    /// Keeps `reply` for `cchat_recv` in place of the session's last one. A
    /// reply that does not fit the budget is replaced by a short one saying so.
    pub(super) fn keep_reply(
        &mut self,
        handle: i32,
        reply: &Reply,
        result: Result<(), CallError>,
    ) -> Result<(), CallError> {
        let Some(session) = self.sessions.get_mut(&handle) else {
            return result;
        };
        let old = session.reply.take().map_or(0, |r| r.len());
        session.charged = session.charged.saturating_sub(old);
        self.deps.budget.release_memory(old);
        let bytes = encode(reply);
        let (bytes, result) = match self.deps.budget.charge_memory(bytes.len()) {
            Ok(()) => (bytes, result),
            Err(full) => {
                let note = encode(&Reply {
                    error: Some(format!("the reply was not kept: {full}")),
                    ..Reply::default()
                });
                // Bounded in size, so kept past the budget (and given back
                // with the session like the rest).
                self.deps.budget.keep_memory(note.len());
                let result = match result {
                    Err(CallError::Stop(stop)) => Err(CallError::Stop(stop)),
                    _ => Err(self.refuse(full)),
                };
                (note, result)
            }
        };
        if let Some(session) = self.sessions.get_mut(&handle) {
            session.charged += bytes.len();
            session.reply = Some(bytes);
        }
        result
    }
}

/// The send's tool calls as the guest's reply lists them.
pub(super) fn trace_of(trace: &[CallTrace]) -> Vec<ToolCall> {
    trace
        .iter()
        .map(|t| ToolCall {
            tool_call_id: t.tool_call_id.clone(),
            name: t.name.clone(),
            server: t.executed.as_ref().map(|ran| ran.server.clone()),
            tool: t
                .executed
                .as_ref()
                .map(|ran| ran.tool.clone())
                .or_else(|| t.guest_tool.clone()),
            guest: t.guest_tool.is_some(),
            is_error: t.is_error,
            duration_ms: t.duration.as_millis() as u64,
            bytes: t.bytes as u64,
            search: t.search.clone(),
        })
        .collect()
}

fn encode(reply: &Reply) -> Vec<u8> {
    // A struct of strings, numbers and JSON values always serializes.
    serde_json::to_vec(reply).unwrap_or_default()
}
