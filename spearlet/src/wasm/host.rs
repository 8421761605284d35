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

pub const ENOENT: i32 = 2;
pub const EIO: i32 = 5;
pub const EBADF: i32 = 9;
pub const EACCES: i32 = 13;
pub const EFAULT: i32 = 14;
pub const EINVAL: i32 = 22;
pub const EMFILE: i32 = 24;
pub const ENOSPC: i32 = 28;
pub const ETIMEDOUT: i32 = 110;

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
        }
    }
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
fn write_out(caller: &mut Caller<'_, GuestState>, out: u32, out_len: u32, bytes: &[u8]) -> i32 {
    let Ok(memory) = memory(caller) else {
        return -EFAULT;
    };
    let len_at = out_len as usize;
    let Some(cap_bytes) = memory
        .data(&caller)
        .get(len_at..len_at + 4)
        .map(|b| [b[0], b[1], b[2], b[3]])
    else {
        return -EFAULT;
    };
    let capacity = u32::from_le_bytes(cap_bytes) as usize;
    let needed = (bytes.len() as u32).to_le_bytes();
    let data = memory.data_mut(&mut *caller);
    if bytes.len() > capacity {
        data[len_at..len_at + 4].copy_from_slice(&needed);
        return -ENOSPC;
    }
    let start = out as usize;
    let Some(target) = start
        .checked_add(bytes.len())
        .and_then(|end| data.get_mut(start..end))
    else {
        return -EFAULT;
    };
    target.copy_from_slice(bytes);
    data[len_at..len_at + 4].copy_from_slice(&needed);
    0
}

fn errno(error: &ParamError) -> i32 {
    match error {
        ParamError::Denied(_) => -EACCES,
        ParamError::Invalid { .. } => -EINVAL,
        ParamError::Unknown(_) => -ENOENT,
    }
}

/// Restores the CPU budget after a host call, so host time never counts
/// as guest CPU (the wall-clock limit covers it).
fn reset_cpu(caller: &mut Caller<'_, GuestState>) {
    let ticks = caller.data().cpu_ticks;
    caller.as_context_mut().set_epoch_deadline(ticks);
}

/// Adds the seven cchat functions to `linker`.
pub fn add_cchat_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "spear",
        "cchat_create",
        |mut caller: Caller<'_, GuestState>| -> i32 {
            reset_cpu(&mut caller);
            let host = &mut caller.data_mut().cchat;
            if host.sessions.len() >= host.limits.max_sessions {
                return -EMFILE;
            }
            let handle = host.next_handle;
            host.next_handle = host.next_handle.checked_add(1).unwrap_or(1);
            let policy = SessionPolicy::from_task(&host.task);
            host.sessions.insert(
                handle,
                Session {
                    policy,
                    messages: Vec::new(),
                    reply: None,
                },
            );
            handle
        },
    )?;

    linker.func_wrap(
        "spear",
        "cchat_ctl_set_param",
        |mut caller: Caller<'_, GuestState>,
         handle: i32,
         key: u32,
         key_len: u32,
         value: u32,
         value_len: u32|
         -> i32 {
            reset_cpu(&mut caller);
            let key = match read_str(&mut caller, key, key_len) {
                Ok(k) => k,
                Err(e) => return -e,
            };
            let value: Value =
                match read(&mut caller, value, value_len).map(|b| serde_json::from_slice(&b)) {
                    Ok(Ok(v)) => v,
                    Ok(Err(_)) => return -EINVAL,
                    Err(e) => return -e,
                };
            let host = &mut caller.data_mut().cchat;
            let task = host.task.clone();
            let Some(session) = host.sessions.get_mut(&handle) else {
                return -EBADF;
            };
            match set_param(&task, &mut session.policy, &key, &value) {
                Ok(()) => 0,
                Err(error) => errno(&error),
            }
        },
    )?;

    linker.func_wrap(
        "spear",
        "cchat_ctl_get_param",
        |mut caller: Caller<'_, GuestState>,
         handle: i32,
         key: u32,
         key_len: u32,
         out: u32,
         out_len: u32|
         -> i32 {
            reset_cpu(&mut caller);
            let key = match read_str(&mut caller, key, key_len) {
                Ok(k) => k,
                Err(e) => return -e,
            };
            let host = &caller.data().cchat;
            let Some(session) = host.sessions.get(&handle) else {
                return -EBADF;
            };
            let value = match get_param(&host.task, &session.policy, &key) {
                Ok(v) => v.to_string().into_bytes(),
                Err(error) => return errno(&error),
            };
            write_out(&mut caller, out, out_len, &value)
        },
    )?;

    linker.func_wrap(
        "spear",
        "cchat_write_msg",
        |mut caller: Caller<'_, GuestState>,
         handle: i32,
         role: u32,
         role_len: u32,
         text: u32,
         text_len: u32|
         -> i32 {
            reset_cpu(&mut caller);
            let role = match read_str(&mut caller, role, role_len) {
                Ok(r) => r,
                Err(e) => return -e,
            };
            let text = match read_str(&mut caller, text, text_len) {
                Ok(t) => t,
                Err(e) => return -e,
            };
            let message = match role.as_str() {
                "system" => ChatMessage::system(&text),
                "user" => ChatMessage::user(&text),
                _ => return -EINVAL,
            };
            let Some(session) = caller.data_mut().cchat.sessions.get_mut(&handle) else {
                return -EBADF;
            };
            if session.messages.len() >= MAX_MESSAGES {
                return -ENOSPC;
            }
            session.messages.push(message);
            0
        },
    )?;

    linker.func_wrap_async("spear", "cchat_send", |mut caller: Caller<'_, GuestState>, (handle, _flags): (i32, u32)| {
        Box::new(async move {
            let host = &mut caller.data_mut().cchat;
            let Some(session) = host.sessions.get_mut(&handle) else { return -EBADF };
            let mut messages = std::mem::take(&mut session.messages);
            let policy = session.policy.clone();
            let (task, router, backend) = (host.task.clone(), host.router.clone(), Arc::clone(&host.backend));
            let limits = LoopLimits {
                max_iterations: host.limits.max_iterations,
                max_total_tool_calls: host.limits.max_total_tool_calls,
                deadline: host.deadline,
            };
            let outcome = run_tool_loop(backend.as_ref(), &router, &task, &policy, &mut messages, limits).await;
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
            let (content, error, code) = match &outcome.result {
                Ok(text) => (text.clone(), None, 0),
                Err(LoopError::Deadline) => (String::new(), Some(LoopError::Deadline.to_string()), -ETIMEDOUT),
                Err(other) => (String::new(), Some(other.to_string()), -EIO),
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
            if let Some(session) = host.sessions.get_mut(&handle) {
                session.messages = messages;
                session.reply = Some(reply.to_string().into_bytes());
            }
            reset_cpu(&mut caller);
            code
        })
    })?;

    linker.func_wrap(
        "spear",
        "cchat_recv",
        |mut caller: Caller<'_, GuestState>, handle: i32, out: u32, out_len: u32| -> i32 {
            reset_cpu(&mut caller);
            let Some(session) = caller.data().cchat.sessions.get(&handle) else {
                return -EBADF;
            };
            let Some(reply) = session.reply.clone() else {
                return -ENOENT;
            };
            write_out(&mut caller, out, out_len, &reply)
        },
    )?;

    linker.func_wrap(
        "spear",
        "cchat_close",
        |mut caller: Caller<'_, GuestState>, handle: i32| -> i32 {
            reset_cpu(&mut caller);
            match caller.data_mut().cchat.sessions.remove(&handle) {
                Some(_) => 0,
                None => -EBADF,
            }
        },
    )?;
    Ok(())
}
