//! The cchat host API, module `spear` (docs/guest-api.md). Every pointer and
//! length from the guest is bounds-checked before use, sizes are capped
//! before the host allocates, and failures are negative errno values.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use wasmtime::{AsContextMut, Caller, Extern, Linker, StoreLimits};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::runtime::GuestLimits;
use crate::cchat::{run_tool_loop, CallTrace, LoopError, LoopLimits};
use crate::llm::{ChatMessage, LlmBackend};
use crate::policy::{get_param, set_param, ParamError, SessionPolicy, TaskPolicy};
use crate::router::Router;

// One errno table for both sides of the ABI: the guest SDK's.
use spear_guest::errno::{EACCES, EBADF, EFAULT, EINVAL, EIO, EMFILE, ENOENT, ENOSPC, ETIMEDOUT};

/// Largest key, value or message the host accepts from a guest.
const MAX_INPUT: u32 = 1024 * 1024;
/// Messages kept per session at most.
const MAX_MESSAGES: usize = 1024;

/// Everything a guest's store holds.
pub struct GuestState {
    pub wasi: WasiP1Ctx,
    pub limits: StoreLimits,
    pub cchat: CchatHost,
    /// The CPU budget, restored after every host call.
    pub cpu_ticks: u64,
}

struct Session {
    policy: SessionPolicy,
    messages: Vec<ChatMessage>,
    reply: Option<Vec<u8>>,
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
    ) -> Self {
        Self {
            task,
            router,
            backend,
            sessions: HashMap::new(),
            next_handle: 1,
            deadline,
            limits,
            trace: Vec::new(),
            iterations: 0,
        }
    }
}

/// A host call's result: a value (zero or a handle) or an errno.
type HostResult = Result<i32, i32>;

/// The ABI's return value: the value, or the negated errno.
fn code(result: HostResult) -> i32 {
    result.unwrap_or_else(|errno| -errno)
}

/// The guest's exported memory.
fn memory(caller: &mut Caller<'_, GuestState>) -> Result<wasmtime::Memory, i32> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(EFAULT),
    }
}

/// Copies `len` bytes at `ptr` out of guest memory, refusing sizes over the cap.
fn read(caller: &mut Caller<'_, GuestState>, ptr: u32, len: u32) -> Result<Vec<u8>, i32> {
    if len > MAX_INPUT {
        return Err(EINVAL);
    }
    let memory = memory(caller)?;
    let start = ptr as usize;
    let end = start.checked_add(len as usize).ok_or(EFAULT)?;
    memory
        .data(&caller)
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or(EFAULT)
}

fn read_str(caller: &mut Caller<'_, GuestState>, ptr: u32, len: u32) -> Result<String, i32> {
    String::from_utf8(read(caller, ptr, len)?).map_err(|_| EINVAL)
}

/// Writes `bytes` to the guest buffer `out` whose capacity is at `out_len`;
/// on a short buffer writes the needed size there and fails with ENOSPC.
fn write_out(
    caller: &mut Caller<'_, GuestState>,
    out: u32,
    out_len: u32,
    bytes: &[u8],
) -> HostResult {
    let memory = memory(caller)?;
    let len_at = out_len as usize..out_len as usize + 4;
    let data = memory.data_mut(&mut *caller);
    let capacity = data
        .get(len_at.clone())
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or(EFAULT)?;
    let needed = (bytes.len() as u32).to_le_bytes();
    if bytes.len() > capacity {
        data[len_at].copy_from_slice(&needed);
        return Err(ENOSPC);
    }
    let start = out as usize;
    let target = start
        .checked_add(bytes.len())
        .and_then(|end| data.get_mut(start..end))
        .ok_or(EFAULT)?;
    target.copy_from_slice(bytes);
    data[len_at].copy_from_slice(&needed);
    Ok(0)
}

fn param_errno(error: ParamError) -> i32 {
    match error {
        ParamError::Denied(_) => EACCES,
        ParamError::Invalid { .. } => EINVAL,
        ParamError::Unknown(_) => ENOENT,
    }
}

/// Restores the CPU budget after a host call, so host time never counts
/// as guest CPU (the wall-clock limit covers it).
fn reset_cpu(caller: &mut Caller<'_, GuestState>) {
    let ticks = caller.data().cpu_ticks;
    caller.as_context_mut().set_epoch_deadline(ticks);
}

fn create(caller: &mut Caller<'_, GuestState>) -> HostResult {
    let host = &mut caller.data_mut().cchat;
    if host.sessions.len() >= host.limits.max_sessions {
        return Err(EMFILE);
    }
    let handle = host.next_handle;
    host.next_handle = host.next_handle.checked_add(1).unwrap_or(1);
    let session = Session {
        policy: SessionPolicy::from_task(&host.task),
        messages: Vec::new(),
        reply: None,
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
    write_out(caller, out.0, out.1, value.to_string().as_bytes())
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
        _ => return Err(EINVAL),
    };
    let session = caller
        .data_mut()
        .cchat
        .sessions
        .get_mut(&handle)
        .ok_or(EBADF)?;
    if session.messages.len() >= MAX_MESSAGES {
        return Err(ENOSPC);
    }
    session.messages.push(message);
    Ok(0)
}

fn recv(caller: &mut Caller<'_, GuestState>, handle: i32, out: (u32, u32)) -> HostResult {
    let session = caller.data().cchat.sessions.get(&handle).ok_or(EBADF)?;
    let reply = session.reply.clone().ok_or(ENOENT)?;
    write_out(caller, out.0, out.1, &reply)
}

fn close(caller: &mut Caller<'_, GuestState>, handle: i32) -> HostResult {
    caller
        .data_mut()
        .cchat
        .sessions
        .remove(&handle)
        .map(|_| 0)
        .ok_or(EBADF)
}

/// Runs the tool loop for a session and keeps its reply for `cchat_recv`.
async fn send(caller: &mut Caller<'_, GuestState>, handle: i32) -> HostResult {
    let host = &mut caller.data_mut().cchat;
    let session = host.sessions.get_mut(&handle).ok_or(EBADF)?;
    let mut messages = std::mem::take(&mut session.messages);
    let policy = session.policy.clone();
    let (task, router, backend) = (
        host.task.clone(),
        host.router.clone(),
        Arc::clone(&host.backend),
    );
    let limits = LoopLimits {
        max_iterations: host.limits.max_iterations,
        max_total_tool_calls: host.limits.max_total_tool_calls,
        deadline: host.deadline,
    };
    let outcome = run_tool_loop(
        backend.as_ref(),
        &router,
        &task,
        &policy,
        &mut messages,
        limits,
    )
    .await;
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
            Err(ETIMEDOUT),
        ),
        Err(other) => (String::new(), Some(other.to_string()), Err(EIO)),
    };
    let reply = json!({
        "content": content,
        "error": error,
        "usage": {"prompt_tokens": outcome.usage.prompt_tokens, "completion_tokens": outcome.usage.completion_tokens},
        "iterations": outcome.iterations,
        "trace": trace,
    });
    let host = &mut caller.data_mut().cchat;
    host.trace.extend(outcome.trace);
    host.iterations = host.iterations.saturating_add(outcome.iterations);
    if let Some(session) = host.sessions.get_mut(&handle) {
        session.messages = messages;
        session.reply = Some(reply.to_string().into_bytes());
    }
    result
}

/// Adds the seven cchat functions to `linker`. Each restores the CPU budget
/// on return, so time in the host never counts as guest CPU.
pub fn add_cchat_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    type C<'a> = Caller<'a, GuestState>;
    linker.func_wrap("spear", "cchat_create", |mut c: C<'_>| {
        let r = create(&mut c);
        reset_cpu(&mut c);
        code(r)
    })?;
    linker.func_wrap(
        "spear",
        "cchat_ctl_set_param",
        |mut c: C<'_>, h: i32, k: u32, kl: u32, v: u32, vl: u32| {
            let r = ctl_set_param(&mut c, h, (k, kl), (v, vl));
            reset_cpu(&mut c);
            code(r)
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_ctl_get_param",
        |mut c: C<'_>, h: i32, k: u32, kl: u32, o: u32, ol: u32| {
            let r = ctl_get_param(&mut c, h, (k, kl), (o, ol));
            reset_cpu(&mut c);
            code(r)
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_write_msg",
        |mut c: C<'_>, h: i32, r: u32, rl: u32, t: u32, tl: u32| {
            let r = write_msg(&mut c, h, (r, rl), (t, tl));
            reset_cpu(&mut c);
            code(r)
        },
    )?;
    linker.func_wrap_async(
        "spear",
        "cchat_send",
        |mut c: C<'_>, (h, _flags): (i32, u32)| {
            Box::new(async move {
                let r = send(&mut c, h).await;
                reset_cpu(&mut c);
                code(r)
            })
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_recv",
        |mut c: C<'_>, h: i32, o: u32, ol: u32| {
            let r = recv(&mut c, h, (o, ol));
            reset_cpu(&mut c);
            code(r)
        },
    )?;
    linker.func_wrap("spear", "cchat_close", |mut c: C<'_>, h: i32| {
        let r = close(&mut c, h);
        reset_cpu(&mut c);
        code(r)
    })?;
    Ok(())
}
