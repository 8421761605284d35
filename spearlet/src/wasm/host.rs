//! The cchat host API, module `spear` (docs/guest-api.md). Guest memory is
//! reached only through [`super::guest_memory`]; failures are negative errno
//! values; everything the host keeps for the guest is charged to the run's
//! [`RunBudget`] before it is kept.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use wasmtime::{Caller, Linker, StoreLimits};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::cpu::CpuClock;
use super::guest_memory::{read, read_str, write_out};
use super::runtime::GuestLimits;
use super::stop::StopReason;
use crate::cchat::{
    run_tool_loop, BudgetError, BudgetKind, CallTrace, LoopError, LoopLimits, RunBudget, Strike,
};
use crate::llm::{ChatMessage, LlmBackend};
use crate::policy::{get_param, set_param, ParamError, SessionPolicy, TaskPolicy};
use crate::router::Router;

// One errno table for both sides of the ABI: the guest SDK's.
use spear_guest::errno::{
    EACCES, EBADF, EDQUOT, EINVAL, EIO, EMFILE, ENOENT, ENOMEM, ENOSPC, ETIMEDOUT,
};

/// Messages kept per session at most.
const MAX_MESSAGES: usize = 1024;
/// Host bytes charged for a session itself.
const SESSION_COST: usize = 512;
/// Host bytes charged per entry of the run's tool-call trace.
const TRACE_COST: usize = 256;

/// Everything a guest's store holds.
pub struct GuestState {
    pub wasi: WasiP1Ctx,
    pub limits: StoreLimits,
    pub cchat: CchatHost,
    /// Guest CPU used so far, shared with the epoch callback.
    pub cpu: Arc<CpuClock>,
}

struct Session {
    policy: SessionPolicy,
    messages: Vec<ChatMessage>,
    reply: Option<Vec<u8>>,
    /// Host bytes charged for this session (messages and reply included).
    charged: usize,
}

/// The guest's chat sessions and what they may use.
pub struct CchatHost {
    task: TaskPolicy,
    router: Router,
    backend: Arc<dyn LlmBackend>,
    sessions: HashMap<i32, Session>,
    next_handle: i32,
    deadline: Instant,
    limits: GuestLimits,
    budget: RunBudget,
    /// Every tool call of the run, for the operator and the guest.
    pub trace: Vec<CallTrace>,
    /// Loop iterations (model requests) of every send, for metrics.
    pub iterations: u32,
}

impl CchatHost {
    pub fn new(
        task: TaskPolicy,
        router: Router,
        backend: Arc<dyn LlmBackend>,
        deadline: Instant,
        limits: GuestLimits,
        budget: RunBudget,
    ) -> Self {
        Self {
            task,
            router,
            backend,
            sessions: HashMap::new(),
            next_handle: 1,
            deadline,
            limits,
            budget,
            trace: Vec::new(),
            iterations: 0,
        }
    }

    /// The run's budget counters, for its report.
    pub fn budget(&self) -> &RunBudget {
        &self.budget
    }

    /// A refused budget: an errno the first time, the run stopped after.
    fn refuse(&mut self, error: BudgetError) -> Result<i32, StopReason> {
        let errno = match error.kind {
            BudgetKind::HostMemory => ENOMEM,
            _ => EDQUOT,
        };
        match self.budget.strike(error) {
            Strike::Told(_) => Ok(errno),
            Strike::Stop(error) => Err(StopReason::Budget(error)),
        }
    }

    /// Charges `bytes` to the run for session `handle`.
    fn charge(&mut self, handle: i32, bytes: usize) -> Result<(), BudgetError> {
        self.budget.charge_memory(bytes)?;
        if let Some(session) = self.sessions.get_mut(&handle) {
            session.charged += bytes;
        }
        Ok(())
    }
}

/// A host call's result: a value (zero or a handle), an errno, or the run
/// stopped (a budget refused again).
enum Host {
    Errno(i32),
    Stop(StopReason),
}

impl From<i32> for Host {
    fn from(errno: i32) -> Self {
        Host::Errno(errno)
    }
}

type HostResult = Result<i32, Host>;

/// The ABI's return value (the value, or the negated errno), or a trap
/// that stops the run.
fn code(result: HostResult) -> wasmtime::Result<i32> {
    match result {
        Ok(value) => Ok(value),
        Err(Host::Errno(errno)) => Ok(-errno),
        Err(Host::Stop(reason)) => Err(wasmtime::Error::new(reason)),
    }
}

/// A budget refusal as a host call result.
fn refused(host: &mut CchatHost, error: BudgetError) -> Host {
    match host.refuse(error) {
        Ok(errno) => Host::Errno(errno),
        Err(stop) => Host::Stop(stop),
    }
}

fn param_errno(error: ParamError) -> i32 {
    match error {
        ParamError::Denied(_) => EACCES,
        ParamError::Invalid { .. } => EINVAL,
        ParamError::Unknown(_) => ENOENT,
    }
}

fn create(caller: &mut Caller<'_, GuestState>) -> HostResult {
    let host = &mut caller.data_mut().cchat;
    if host.sessions.len() >= host.limits.max_sessions {
        return Err(EMFILE.into());
    }
    if let Err(full) = host.budget.charge_memory(SESSION_COST) {
        return Err(refused(host, full));
    }
    let handle = host.next_handle;
    host.next_handle = host.next_handle.checked_add(1).unwrap_or(1);
    let session = Session {
        policy: SessionPolicy::from_task(&host.task),
        messages: Vec::new(),
        reply: None,
        charged: SESSION_COST,
    };
    host.sessions.insert(handle, session);
    Ok(handle)
}

fn ctl_set_param(
    caller: &mut Caller<'_, GuestState>,
    handle: i32,
    key: (u32, u32),
    value: (u32, u32),
) -> HostResult {
    let key = read_str(caller, key.0, key.1)?;
    let value: Value =
        serde_json::from_slice(&read(caller, value.0, value.1)?).map_err(|_| EINVAL)?;
    let host = &mut caller.data_mut().cchat;
    let session = host.sessions.get_mut(&handle).ok_or(EBADF)?;
    set_param(&host.task, &mut session.policy, &key, &value).map_err(param_errno)?;
    Ok(0)
}

fn ctl_get_param(
    caller: &mut Caller<'_, GuestState>,
    handle: i32,
    key: (u32, u32),
    out: (u32, u32),
) -> HostResult {
    let key = read_str(caller, key.0, key.1)?;
    let host = &caller.data().cchat;
    let session = host.sessions.get(&handle).ok_or(EBADF)?;
    let value = get_param(&host.task, &session.policy, &key).map_err(param_errno)?;
    Ok(write_out(
        caller,
        out.0,
        out.1,
        value.to_string().as_bytes(),
    )?)
}

fn write_msg(
    caller: &mut Caller<'_, GuestState>,
    handle: i32,
    role: (u32, u32),
    text: (u32, u32),
) -> HostResult {
    let role = read_str(caller, role.0, role.1)?;
    let text = read_str(caller, text.0, text.1)?;
    let message = match role.as_str() {
        "system" => ChatMessage::system(&text),
        "user" => ChatMessage::user(&text),
        _ => return Err(EINVAL.into()),
    };
    let host = &mut caller.data_mut().cchat;
    let session = host.sessions.get_mut(&handle).ok_or(EBADF)?;
    if session.messages.len() >= MAX_MESSAGES {
        return Err(ENOSPC.into());
    }
    if let Err(full) = host.charge(handle, message.footprint()) {
        return Err(refused(host, full));
    }
    if let Some(session) = host.sessions.get_mut(&handle) {
        session.messages.push(message);
    }
    Ok(0)
}

fn recv(caller: &mut Caller<'_, GuestState>, handle: i32, out: (u32, u32)) -> HostResult {
    let session = caller.data().cchat.sessions.get(&handle).ok_or(EBADF)?;
    let reply = session.reply.clone().ok_or(ENOENT)?;
    Ok(write_out(caller, out.0, out.1, &reply)?)
}

fn close(caller: &mut Caller<'_, GuestState>, handle: i32) -> HostResult {
    let host = &mut caller.data_mut().cchat;
    let session = host.sessions.remove(&handle).ok_or(EBADF)?;
    host.budget.release_memory(session.charged);
    Ok(0)
}

/// Runs the tool loop for a session and keeps its reply for `cchat_recv`.
async fn send(caller: &mut Caller<'_, GuestState>, handle: i32) -> HostResult {
    let host = &mut caller.data_mut().cchat;
    let CchatHost {
        task,
        router,
        backend,
        sessions,
        budget,
        limits,
        deadline,
        ..
    } = &mut *host;
    let session = sessions.get_mut(&handle).ok_or(EBADF)?;
    let limits = LoopLimits {
        max_iterations: limits.max_iterations,
        max_total_tool_calls: limits.max_total_tool_calls,
        deadline: *deadline,
    };
    let before = budget.used(BudgetKind::HostMemory);
    let outcome = run_tool_loop(
        backend.as_ref(),
        router,
        task,
        &session.policy,
        &mut session.messages,
        limits,
        budget,
    )
    .await;
    // What the loop kept (assistant and tool messages) is the session's.
    session.charged += budget.used(BudgetKind::HostMemory).saturating_sub(before) as usize;
    let trace: Vec<Value> = outcome
        .trace
        .iter()
        .map(|t| {
            json!({
                "tool_call_id": t.tool_call_id, "name": t.name,
                "server": t.executed.as_ref().map(|(s, _)| s), "tool": t.executed.as_ref().map(|(_, t)| t),
                "is_error": t.is_error, "duration_ms": t.duration.as_millis() as u64, "bytes": t.bytes,
            })
        })
        .collect();
    let (content, error, result) = match &outcome.result {
        Ok(text) => (text.clone(), None, Ok(0)),
        Err(LoopError::Deadline) => (
            String::new(),
            Some(LoopError::Deadline.to_string()),
            Err(Host::Errno(ETIMEDOUT)),
        ),
        Err(LoopError::Budget(spent)) => (
            String::new(),
            Some(spent.to_string()),
            Err(refused(host, *spent)),
        ),
        Err(other) => (
            String::new(),
            Some(other.to_string()),
            Err(Host::Errno(EIO)),
        ),
    };
    let reply = json!({
        "content": content,
        "error": error,
        "usage": {"prompt_tokens": outcome.usage.prompt_tokens, "completion_tokens": outcome.usage.completion_tokens},
        "iterations": outcome.iterations,
        "trace": trace,
    })
    .to_string()
    .into_bytes();
    host.iterations = host.iterations.saturating_add(outcome.iterations);
    // The run's trace is kept for the operator (bounded by the tool-call
    // budget, so charged without a check).
    host.budget.keep_memory(outcome.trace.len() * TRACE_COST);
    host.trace.extend(outcome.trace);
    keep_reply(host, handle, reply, result)
}

/// Keeps `reply` for `cchat_recv` in place of the session's last one. A
/// reply that does not fit the budget is replaced by a short one saying so.
fn keep_reply(host: &mut CchatHost, handle: i32, reply: Vec<u8>, result: HostResult) -> HostResult {
    let Some(session) = host.sessions.get_mut(&handle) else {
        return result;
    };
    let old = session.reply.take().map_or(0, |r| r.len());
    session.charged = session.charged.saturating_sub(old);
    host.budget.release_memory(old);
    let (reply, result) = match host.charge(handle, reply.len()) {
        Ok(()) => (reply, result),
        Err(full) => {
            let note = json!({"content": "", "error": format!("the reply was not kept: {full}")})
                .to_string()
                .into_bytes();
            // Bounded in size, so kept past the budget (and given back
            // with the session like the rest).
            host.budget.keep_memory(note.len());
            if let Some(session) = host.sessions.get_mut(&handle) {
                session.charged += note.len();
            }
            let result = match result {
                Err(Host::Stop(stop)) => Err(Host::Stop(stop)),
                _ => Err(refused(host, full)),
            };
            (note, result)
        }
    };
    if let Some(session) = host.sessions.get_mut(&handle) {
        session.reply = Some(reply);
    }
    result
}

/// Adds the seven cchat functions to `linker`.
pub fn add_cchat_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    type C<'a> = Caller<'a, GuestState>;
    linker.func_wrap("spear", "cchat_create", |mut c: C<'_>| code(create(&mut c)))?;
    linker.func_wrap(
        "spear",
        "cchat_ctl_set_param",
        |mut c: C<'_>, h: i32, k: u32, kl: u32, v: u32, vl: u32| {
            code(ctl_set_param(&mut c, h, (k, kl), (v, vl)))
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_ctl_get_param",
        |mut c: C<'_>, h: i32, k: u32, kl: u32, o: u32, ol: u32| {
            code(ctl_get_param(&mut c, h, (k, kl), (o, ol)))
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_write_msg",
        |mut c: C<'_>, h: i32, r: u32, rl: u32, t: u32, tl: u32| {
            code(write_msg(&mut c, h, (r, rl), (t, tl)))
        },
    )?;
    linker.func_wrap_async(
        "spear",
        "cchat_send",
        |mut c: C<'_>, (h, _flags): (i32, u32)| {
            Box::new(async move { code(send(&mut c, h).await) })
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_recv",
        |mut c: C<'_>, h: i32, o: u32, ol: u32| code(recv(&mut c, h, (o, ol))),
    )?;
    linker.func_wrap("spear", "cchat_close", |mut c: C<'_>, h: i32| {
        code(close(&mut c, h))
    })?;
    Ok(())
}
