//! A run's chat sessions: what each `cchat_*` call does once
//! [`super::host_api`] has read its arguments out of guest memory.
//!
//! [`Sessions`] owns the run's [`RunBudget`]: everything kept for the guest
//! (sessions, messages, histories, replies, the trace) is charged before it
//! is kept and given back when the session closes. A refusal is a
//! [`CallError::Refused`] with an errno and the sentence the guest reads
//! back with `cchat_last_error`; a budget refused twice stops the run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use spear_guest::errno::{
    EACCES, EBADF, EDQUOT, EINVAL, EIO, EMFILE, ENOENT, ENOMEM, ENOSPC, ETIMEDOUT,
};
use spear_guest::params::send_flags;
use spear_guest::reply::{Reply, ToolCall, Usage};

use super::{
    run_tool_loop, BudgetError, BudgetKind, CallTrace, LoopError, LoopLimits, RunBudget, Strike,
};
use crate::llm::{ChatMessage, LlmBackend};
use crate::policy::{get_param, set_param, ParamError, SessionPolicy, TaskPolicy};
use crate::tools::Router;
use crate::wasm::{GuestLimits, StopReason};

/// Messages kept per session at most.
const MAX_MESSAGES: usize = 1024;
/// Host bytes charged for a session itself.
const SESSION_COST: usize = 512;
/// Host bytes charged per entry of the run's tool-call trace.
const TRACE_COST: usize = 256;

/// Why a cchat call did not succeed.
#[derive(Debug)]
pub enum CallError {
    /// The call failed with `errno`; `sentence` says why, for the guest.
    Refused { errno: i32, sentence: String },
    /// The run is over (a budget refused after the guest was told).
    Stop(StopReason),
}

impl CallError {
    pub fn refused(errno: i32, sentence: impl Into<String>) -> Self {
        CallError::Refused {
            errno,
            sentence: sentence.into(),
        }
    }

    fn bad_handle(handle: i32) -> Self {
        Self::refused(EBADF, format!("session {handle} is not open"))
    }
}

impl From<ParamError> for CallError {
    fn from(error: ParamError) -> Self {
        let errno = match error {
            ParamError::Denied(_) => EACCES,
            ParamError::Invalid { .. } => EINVAL,
            ParamError::Unknown(_) => ENOENT,
        };
        CallError::refused(errno, error.to_string())
    }
}

struct Session {
    policy: SessionPolicy,
    messages: Vec<ChatMessage>,
    reply: Option<Vec<u8>>,
    /// Host bytes charged for this session (messages and reply included).
    charged: usize,
}

/// What a run's sessions may use, fixed when the run starts.
pub struct SessionDeps {
    pub task: TaskPolicy,
    pub router: Router,
    pub backend: Arc<dyn LlmBackend>,
    pub deadline: Instant,
    pub limits: GuestLimits,
    pub budget: RunBudget,
}

/// The run's chat sessions and what they may use.
pub struct Sessions {
    deps: SessionDeps,
    sessions: HashMap<i32, Session>,
    next_handle: i32,
    /// Every tool call of the run, for the operator and the guest.
    pub trace: Vec<CallTrace>,
    /// Loop iterations (model requests) of every send, for metrics.
    pub iterations: u32,
}

impl Sessions {
    pub fn new(deps: SessionDeps) -> Self {
        Self {
            deps,
            sessions: HashMap::new(),
            next_handle: 1,
            trace: Vec::new(),
            iterations: 0,
        }
    }

    /// The run's budget counters, for its report.
    pub fn budget(&self) -> &RunBudget {
        &self.deps.budget
    }

    /// A refused budget: an errno the first time, the run stopped after.
    fn refuse(&mut self, error: BudgetError) -> CallError {
        let errno = match error.kind {
            BudgetKind::HostMemory => ENOMEM,
            _ => EDQUOT,
        };
        match self.deps.budget.strike(error) {
            Strike::Told(error) => CallError::refused(errno, error.to_string()),
            Strike::Stop(error) => CallError::Stop(StopReason::Budget(error)),
        }
    }

    /// Charges `bytes` to the run for session `handle`, or refuses.
    fn charge(&mut self, handle: i32, bytes: usize) -> Result<(), CallError> {
        if let Err(full) = self.deps.budget.charge_memory(bytes) {
            return Err(self.refuse(full));
        }
        if let Some(session) = self.sessions.get_mut(&handle) {
            session.charged += bytes;
        }
        Ok(())
    }

    fn session(&mut self, handle: i32) -> Result<&mut Session, CallError> {
        self.sessions
            .get_mut(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))
    }

    /// `cchat_create`: a new session with the task's defaults.
    pub fn create(&mut self) -> Result<i32, CallError> {
        let max = self.deps.limits.max_sessions;
        if self.sessions.len() >= max {
            return Err(CallError::refused(
                EMFILE,
                format!("this run already has {max} open sessions (limits.max_sessions); close one first"),
            ));
        }
        if let Err(full) = self.deps.budget.charge_memory(SESSION_COST) {
            return Err(self.refuse(full));
        }
        let handle = self.next_handle;
        self.next_handle = self.next_handle.checked_add(1).unwrap_or(1);
        let session = Session {
            policy: SessionPolicy::from_task(&self.deps.task),
            messages: Vec::new(),
            reply: None,
            charged: SESSION_COST,
        };
        self.sessions.insert(handle, session);
        Ok(handle)
    }

    /// `cchat_ctl_set_param`: narrows the session's policy.
    pub fn set_param(&mut self, handle: i32, key: &str, value: &[u8]) -> Result<(), CallError> {
        let value: serde_json::Value = serde_json::from_slice(value).map_err(|e| {
            CallError::refused(EINVAL, format!("the value for {key} is not JSON: {e}"))
        })?;
        let task = &self.deps.task;
        let session = self
            .sessions
            .get_mut(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        Ok(set_param(task, &mut session.policy, key, &value)?)
    }

    /// `cchat_ctl_get_param`: a session or task param, as JSON.
    pub fn get_param(&self, handle: i32, key: &str) -> Result<String, CallError> {
        let session = self
            .sessions
            .get(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        Ok(get_param(&self.deps.task, &session.policy, key)?.to_string())
    }

    /// `cchat_write_msg`: adds a `system` or `user` message.
    pub fn write_msg(&mut self, handle: i32, role: &str, text: &str) -> Result<(), CallError> {
        let message = match role {
            "system" => ChatMessage::system(text),
            "user" => ChatMessage::user(text),
            other => {
                let shown = spear_common::text::prefix(other, 32);
                return Err(CallError::refused(
                    EINVAL,
                    format!("role '{shown}' is not one a guest may write; use system or user"),
                ));
            }
        };
        if self.session(handle)?.messages.len() >= MAX_MESSAGES {
            return Err(CallError::refused(
                ENOSPC,
                format!("session {handle} already holds {MAX_MESSAGES} messages; open a new one"),
            ));
        }
        self.charge(handle, message.footprint())?;
        self.session(handle)?.messages.push(message);
        Ok(())
    }

    /// `cchat_recv`: the session's last reply.
    pub fn reply(&self, handle: i32) -> Result<&[u8], CallError> {
        let session = self
            .sessions
            .get(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        session.reply.as_deref().ok_or_else(|| {
            CallError::refused(
                ENOENT,
                format!("session {handle} has no reply yet; call cchat_send first"),
            )
        })
    }

    /// `cchat_close`: ends the session and gives back what it was charged.
    pub fn close(&mut self, handle: i32) -> Result<(), CallError> {
        let session = self
            .sessions
            .remove(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        self.deps.budget.release_memory(session.charged);
        Ok(())
    }

    /// `cchat_send`: runs the model (with the tool loop when `flags` asks)
    /// and keeps the reply for `cchat_recv`, whatever the outcome.
    pub async fn send(&mut self, handle: i32, flags: u32) -> Result<(), CallError> {
        if flags & !send_flags::ALL != 0 {
            return Err(CallError::refused(
                EINVAL,
                format!("cchat_send flags {flags:#x} have bits the node does not know; bit 0 (automatic tool calls) is the only flag"),
            ));
        }
        let auto_tools = flags & send_flags::AUTO_TOOL_CALLS != 0;
        let SessionDeps {
            task,
            router,
            backend,
            deadline,
            limits,
            budget,
        } = &mut self.deps;
        let session = self
            .sessions
            .get_mut(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        // Without automatic tool calls: one request, no tools offered.
        let (policy, max_iterations) = if auto_tools {
            (session.policy.clone(), limits.max_iterations)
        } else {
            let mut plain = session.policy.clone();
            plain.enabled = false;
            (plain, 1)
        };
        let loop_limits = LoopLimits {
            max_iterations,
            max_total_tool_calls: limits.max_total_tool_calls,
            deadline: *deadline,
        };
        let before = budget.used(BudgetKind::HostMemory);
        let outcome = run_tool_loop(
            backend.as_ref(),
            router,
            task,
            &policy,
            &mut session.messages,
            loop_limits,
            budget,
        )
        .await;
        // What the loop kept (assistant and tool messages) is the session's.
        session.charged += budget.used(BudgetKind::HostMemory).saturating_sub(before) as usize;
        let (reply, result) = match outcome.result {
            Ok(content) => (reply_of(content, None, &outcome.trace), Ok(())),
            Err(error) => {
                let sentence = error.to_string();
                let result = match error {
                    LoopError::Deadline => CallError::refused(ETIMEDOUT, sentence.clone()),
                    LoopError::Budget(spent) => self.refuse(spent),
                    _ => CallError::refused(EIO, sentence.clone()),
                };
                (
                    reply_of(String::new(), Some(sentence), &outcome.trace),
                    Err(result),
                )
            }
        };
        let reply = Reply {
            usage: Usage {
                prompt_tokens: outcome.usage.prompt_tokens,
                completion_tokens: outcome.usage.completion_tokens,
            },
            iterations: outcome.iterations,
            stop_reason: outcome.stop,
            ..reply
        };
        self.iterations = self.iterations.saturating_add(outcome.iterations);
        // The run's trace is kept for the operator (bounded by the tool-call
        // budget, so charged without a check).
        self.deps
            .budget
            .keep_memory(outcome.trace.len() * TRACE_COST);
        self.trace.extend(outcome.trace);
        self.keep_reply(handle, &reply, result)
    }

    /// Keeps `reply` for `cchat_recv` in place of the session's last one. A
    /// reply that does not fit the budget is replaced by a short one saying so.
    fn keep_reply(
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

/// A reply with `content` or `error` and the send's tool calls.
fn reply_of(content: String, error: Option<String>, trace: &[CallTrace]) -> Reply {
    let trace = trace
        .iter()
        .map(|t| ToolCall {
            tool_call_id: t.tool_call_id.clone(),
            name: t.name.clone(),
            server: t.executed.as_ref().map(|ran| ran.server.clone()),
            tool: t.executed.as_ref().map(|ran| ran.tool.clone()),
            is_error: t.is_error,
            duration_ms: t.duration.as_millis() as u64,
            bytes: t.bytes as u64,
        })
        .collect();
    Reply {
        content,
        error,
        trace,
        ..Reply::default()
    }
}

fn encode(reply: &Reply) -> Vec<u8> {
    // A struct of strings and numbers always serializes.
    serde_json::to_vec(reply).unwrap_or_default()
}
