//! A run's chat sessions: what each `cchat_*` call does once
//! [`super::host_api`] has read its arguments out of guest memory. Sends
//! are in `send.rs`, guest-driven tool calls in `call_tool.rs`.
//!
//! [`Sessions`] owns the run's [`RunBudget`]: everything kept for the guest
//! (sessions, messages, histories, tools, replies, the trace) is charged
//! before it is kept and given back when the session closes. A refusal is
//! a [`CallError::Refused`] with an errno and the sentence the guest reads
//! back with `cchat_last_error`; a budget refused twice stops the run.
//!
//! Re-entrancy: while a send runs, the only guest code that can run is a
//! guest tool callback, and every cchat call from there is refused with
//! `EBUSY` (`cchat_last_error` excepted): a callback cannot send, close or
//! change the session that is calling it, or any other.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::json;
use spear_guest::calls::{AssistantMessage, ToolMessage};
use spear_guest::errno::{
    EACCES, EBADF, EBUSY, EDQUOT, EEXIST, EINVAL, EMFILE, ENOENT, ENOMEM, ENOSPC,
};
use spear_guest::request::{Param, RequestParams};

use super::guest_tools::{GuestToolError, GuestTools};
use super::history::{self, HistoryError};
use super::limits::{ChatLimits, ChatStop};
use super::models::{Chosen, ModelRefused, Models};
use super::request_params::{self, Ceilings};
use super::{BudgetError, BudgetKind, CallTrace, RunBudget, Strike};
use crate::llm::ChatMessage;
use crate::tool_policy::{get_param, is_mcp_key, set_param, ParamError, SessionPolicy, TaskPolicy};
use crate::tools::{Router, Search, ToolSet};
use crate::wasm::StopReason;

/// Messages kept per session at most.
pub(super) const MAX_MESSAGES: usize = 1024;
/// Host bytes charged for a session itself.
const SESSION_COST: usize = 512;

/// Why a cchat call did not succeed.
#[derive(Debug)]
pub enum CallError {
    /// The call failed with `errno`; `sentence` says why, for the guest.
    Refused { errno: i32, sentence: String },
    /// The run is over (a budget refused after the guest was told, a guest
    /// tool that broke the dispatcher contract).
    Stop(StopReason),
    /// The run is over with the guest's own error (a trap, a limit or an
    /// exit inside a guest tool callback), unwound as it is.
    Unwind(wasmtime::Error),
}

/// The read-only param naming who the run is for (`kind`, `issuer`,
/// `subject`, `groups`): a guest may read it, never set it.
pub const PRINCIPAL_PARAM: &str = "principal";

impl CallError {
    pub fn refused(errno: i32, sentence: impl Into<String>) -> Self {
        CallError::Refused {
            errno,
            sentence: sentence.into(),
        }
    }

    pub(super) fn bad_handle(handle: i32) -> Self {
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

impl From<HistoryError> for CallError {
    fn from(error: HistoryError) -> Self {
        CallError::refused(EINVAL, error.to_string())
    }
}

impl From<ModelRefused> for CallError {
    fn from(error: ModelRefused) -> Self {
        CallError::refused(EACCES, format!("permission denied: {error}"))
    }
}

impl From<GuestToolError> for CallError {
    fn from(error: GuestToolError) -> Self {
        let errno = match error {
            GuestToolError::Invalid(_) => EINVAL,
            GuestToolError::Exists(_) => EEXIST,
            GuestToolError::TooMany => ENOSPC,
        };
        CallError::refused(errno, error.to_string())
    }
}

pub(super) struct Session {
    pub policy: SessionPolicy,
    pub params: RequestParams,
    /// The backend `params` picked (the task's by default).
    pub chosen: Chosen,
    pub guest_tools: GuestTools,
    pub messages: Vec<ChatMessage>,
    pub reply: Option<Vec<u8>>,
    /// The MCP tools of the last request, which guest-driven calls may use.
    pub offered: ToolSet,
    /// The session's tool search (the tools the model obtained), once a
    /// send searched.
    pub search: Option<Search>,
    /// A guest-driven call's result that did not fit the guest's buffer:
    /// `(the call as written, the result)`, handed back on the retry
    /// without running the tool again.
    pub kept_result: Option<(Vec<u8>, Vec<u8>)>,
    /// Host bytes charged for this session (messages and reply included).
    pub charged: usize,
}

/// What a run's sessions may use, fixed when the run starts.
pub struct SessionDeps {
    pub task: TaskPolicy,
    pub router: Router,
    pub models: Models,
    /// When the run ends, and how long it was given (the default of the
    /// `timeout_ms` param).
    pub deadline: Instant,
    pub wall: std::time::Duration,
    pub limits: ChatLimits,
    pub budget: RunBudget,
}

impl SessionDeps {
    /// A run's deps, its budget drawn from `limits`.
    pub fn new(
        task: TaskPolicy,
        router: Router,
        models: Models,
        deadline: Instant,
        wall: std::time::Duration,
        limits: ChatLimits,
    ) -> Self {
        SessionDeps {
            task,
            router,
            models,
            deadline,
            wall,
            limits,
            budget: RunBudget::new(limits.budget),
        }
    }
}

/// The run's chat sessions and what they may use.
pub struct Sessions {
    pub(super) deps: SessionDeps,
    pub(super) sessions: HashMap<i32, Session>,
    next_handle: i32,
    next_fn_id: i32,
    /// A send is running: the guest is inside a tool callback.
    pub(super) sending: bool,
    /// Every tool call of the run, for the operator and the guest.
    pub trace: Vec<CallTrace>,
    /// Loop iterations (model requests) of every send, for metrics.
    pub iterations: u32,
    /// How long each of those requests took (bounded like the iterations,
    /// by the run's request budget).
    pub model_latency: Vec<std::time::Duration>,
}

impl Sessions {
    pub fn new(deps: SessionDeps) -> Self {
        Self {
            deps,
            sessions: HashMap::new(),
            next_handle: 1,
            next_fn_id: 1,
            sending: false,
            trace: Vec::new(),
            iterations: 0,
            model_latency: Vec::new(),
        }
    }

    /// Who the run is for, as the `principal` param reads: `{"kind",
    /// "issuer", "subject", "groups"}`.
    pub fn principal(&self) -> String {
        let principal = &self.deps.router.trust().scope.principal;
        json!({
            "kind": principal.kind,
            "issuer": principal.issuer,
            "subject": principal.subject,
            "groups": principal.groups,
        })
        .to_string()
    }

    /// The run's task and invocation ids, for a component's facts.
    pub fn run_ids(&self) -> (String, String) {
        let scope = &self.deps.router.trust().scope;
        (scope.task_id.clone(), scope.invocation_id.clone())
    }

    /// Whether session `handle` has guest tools.
    pub fn has_guest_tools(&self, handle: i32) -> Result<bool, CallError> {
        self.sessions
            .get(&handle)
            .map(|session| !session.guest_tools.is_empty())
            .ok_or_else(|| CallError::bad_handle(handle))
    }

    /// The run's budget counters, for its report.
    pub fn budget(&self) -> &RunBudget {
        &self.deps.budget
    }

    /// Refuses every call but `cchat_last_error` from a guest tool callback.
    pub fn not_in_callback(&self, call: &str) -> Result<(), CallError> {
        if self.sending {
            return Err(CallError::refused(
                EBUSY,
                format!("{call} cannot be called from a guest tool callback; return the tool's result first"),
            ));
        }
        Ok(())
    }

    /// A refused budget: an errno the first time, the run stopped after.
    pub(super) fn refuse(&mut self, error: BudgetError) -> CallError {
        let errno = match error.kind {
            BudgetKind::HostMemory => ENOMEM,
            _ => EDQUOT,
        };
        match self.deps.budget.strike(error) {
            Strike::Told(error) => CallError::refused(errno, error.to_string()),
            Strike::Stop(error) => CallError::Stop(ChatStop::Budget(error).into_stop()),
        }
    }

    /// Charges `bytes` to the run for session `handle`, or refuses.
    pub(super) fn charge(&mut self, handle: i32, bytes: usize) -> Result<(), CallError> {
        if let Err(full) = self.deps.budget.charge_memory(bytes) {
            return Err(self.refuse(full));
        }
        if let Some(session) = self.sessions.get_mut(&handle) {
            session.charged += bytes;
        }
        Ok(())
    }

    pub(super) fn session(&mut self, handle: i32) -> Result<&mut Session, CallError> {
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
            params: RequestParams::default(),
            chosen: self.deps.models.default().clone(),
            guest_tools: GuestTools::default(),
            messages: Vec::new(),
            reply: None,
            offered: ToolSet::default(),
            search: None,
            kept_result: None,
            charged: SESSION_COST,
        };
        self.sessions.insert(handle, session);
        Ok(handle)
    }

    fn ceilings(&self) -> Ceilings {
        let limits = &self.deps.limits;
        Ceilings {
            max_iterations: limits.max_iterations,
            max_total_tool_calls: limits.max_total_tool_calls,
            wall: self.deps.wall,
        }
    }

    /// `cchat_ctl_set_param`: an MCP param narrows the session's policy; a
    /// request param is checked against the task, the node and the
    /// session's backend. A refused write changes nothing.
    pub fn set_param(&mut self, handle: i32, key: &str, value: &[u8]) -> Result<(), CallError> {
        let value: serde_json::Value = serde_json::from_slice(value).map_err(|e| {
            let shown = spear_common::text::prefix(key, 64);
            CallError::refused(EINVAL, format!("the value for {shown} is not JSON: {e}"))
        })?;
        if is_mcp_key(key) {
            let task = &self.deps.task;
            let session = self
                .sessions
                .get_mut(&handle)
                .ok_or_else(|| CallError::bad_handle(handle))?;
            return Ok(set_param(task, &mut session.policy, key, &value)?);
        }
        if key == PRINCIPAL_PARAM {
            return Err(CallError::refused(
                EACCES,
                "principal is read-only: it is who the run is for, as SMS verified it",
            ));
        }
        let param = Param::from_key(key).ok_or_else(|| unknown_param(key))?;
        let ceilings = self.ceilings();
        let models = &self.deps.models;
        let session = self
            .sessions
            .get_mut(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        let mut params = session.params.clone();
        request_params::set(&mut params, param, &value, &ceilings)?;
        let chosen = match param {
            Param::Backend | Param::Model => {
                models.pick(params.backend.as_deref(), params.model.as_deref())?
            }
            _ => session.chosen.clone(),
        };
        if let Err(unsupported) = chosen.backend.check(&params) {
            return Err(CallError::refused(EINVAL, unsupported.to_string()));
        }
        session.params = params;
        session.chosen = chosen;
        Ok(())
    }

    /// `cchat_ctl_get_param`: a session or task param, as JSON. Request
    /// params that are unset read as what a send would use.
    pub fn get_param(&self, handle: i32, key: &str) -> Result<String, CallError> {
        let session = self
            .sessions
            .get(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        if is_mcp_key(key) {
            return Ok(get_param(&self.deps.task, &session.policy, key)?.to_string());
        }
        if key == PRINCIPAL_PARAM {
            return Ok(self.principal());
        }
        let param = Param::from_key(key).ok_or_else(|| unknown_param(key))?;
        let set = session.params.get(param);
        let limits = &self.deps.limits;
        let value = match param {
            _ if !set.is_null() => set,
            Param::Backend => json!(session.chosen.name),
            Param::Model => json!(session.chosen.backend.model()),
            Param::MaxIterations => json!(limits.max_iterations),
            Param::MaxTotalToolCalls => json!(limits.max_total_tool_calls),
            Param::TimeoutMs => json!(self.deps.wall.as_millis() as u64),
            _ => set,
        };
        Ok(value.to_string())
    }

    /// `cchat_write_msg`: `system` and `user` take text; `assistant` and
    /// `tool` take the JSON of [`AssistantMessage`] and [`ToolMessage`],
    /// checked so the history stays valid for the provider.
    pub fn write_msg(&mut self, handle: i32, role: &str, text: &str) -> Result<(), CallError> {
        let session = self.session(handle)?;
        let message = match role {
            "system" | "user" => {
                history::check_no_open_calls(&session.messages)?;
                if role == "system" {
                    ChatMessage::system(text)
                } else {
                    ChatMessage::user(text)
                }
            }
            "assistant" => {
                history::check_no_open_calls(&session.messages)?;
                let written: AssistantMessage = parse_json(role, text)?;
                history::assistant(written)?
            }
            "tool" => {
                let answer: ToolMessage = parse_json(role, text)?;
                history::check_answer(&session.messages, &answer.tool_call_id)?;
                ChatMessage::tool(&answer.tool_call_id, answer.content)
            }
            other => {
                let shown = spear_common::text::prefix(other, 32);
                return Err(CallError::refused(
                    EINVAL,
                    format!("role '{shown}' is not one a guest may write; use system, user, assistant or tool"),
                ));
            }
        };
        if session.messages.len() >= MAX_MESSAGES {
            return Err(CallError::refused(
                ENOSPC,
                format!("session {handle} already holds {MAX_MESSAGES} messages; open a new one"),
            ));
        }
        self.charge(handle, message.footprint())?;
        self.session(handle)?.messages.push(message);
        Ok(())
    }

    /// `cchat_write_fn`: registers a guest tool; returns its id, which the
    /// node passes to the guest's dispatcher.
    pub fn write_fn(&mut self, handle: i32, spec: &[u8]) -> Result<i32, CallError> {
        self.session(handle)?;
        // What the host keeps is about the spec as written (at most 64 KiB).
        let cost = spec.len();
        let spec = GuestTools::parse(spec)?;
        let fn_id = self.next_fn_id;
        self.session(handle)?.guest_tools.check_room(&spec.name)?;
        self.charge(handle, cost)?;
        self.session(handle)?.guest_tools.add(fn_id, spec)?;
        self.next_fn_id = self.next_fn_id.checked_add(1).unwrap_or(1);
        Ok(fn_id)
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
}

/// A key that is neither an MCP param nor a request param (`ENOENT`).
fn unknown_param(key: &str) -> CallError {
    let known: Vec<&str> = Param::ALL.iter().map(|p| p.key()).collect();
    CallError::refused(
        ENOENT,
        format!(
            "unknown param '{}'; request params are {}, and MCP params start with mcp.",
            spear_common::text::prefix(key, 64),
            known.join(", ")
        ),
    )
}

fn parse_json<T: serde::de::DeserializeOwned>(role: &str, text: &str) -> Result<T, CallError> {
    serde_json::from_str(text).map_err(|e| {
        let shape = if role == "tool" {
            "{\"tool_call_id\", \"content\"}"
        } else {
            "{\"content\", \"tool_calls\": [{\"id\", \"name\", \"arguments\"}]}"
        };
        CallError::refused(EINVAL, format!("a {role} message is the JSON {shape}: {e}"))
    })
}
