//! The cchat host API, module `spear` (docs/guest-api.md): each function
//! reads its arguments out of guest memory (only through
//! [`crate::wasm::guest_memory`]), asks the run's [`Sessions`] to do the
//! work, and returns the ABI's value: zero or a handle, or a negative errno
//! whose sentence `cchat_last_error` hands back. A run stopped by a budget
//! or a failed guest tool callback is a trap. While a send runs (the guest
//! is inside a tool callback), every call but `cchat_last_error` is
//! `-EBUSY`. [`add_to_linker`] is the entry point.

use wasmtime::{Caller, Linker};

use spear_guest::errno::EINVAL;

use super::dispatch::{dispatcher_exports, missing_exports, Dispatcher};
use super::sessions::{CallError, Sessions};
use super::state::ChatState;
use crate::wasm::guest_memory::{read, read_str, write_out, MemoryError};

/// Longest sentence kept for `cchat_last_error`.
const MAX_SENTENCE: usize = 1024;

type C<'a> = Caller<'a, ChatState>;

impl From<MemoryError> for CallError {
    fn from(error: MemoryError) -> Self {
        CallError::refused(error.errno(), error.to_string())
    }
}

/// The ABI's return value for `result`, remembering a refusal's sentence.
fn code(caller: &mut C<'_>, result: Result<i32, CallError>) -> wasmtime::Result<i32> {
    match result {
        Ok(value) => Ok(value),
        Err(CallError::Refused { errno, sentence }) => {
            let kept = spear_common::text::prefix(&sentence, MAX_SENTENCE).to_string();
            caller.data_mut().host.last_error = Some(kept);
            Ok(-errno)
        }
        Err(CallError::Stop(reason)) => Err(wasmtime::Error::new(reason)),
        Err(CallError::Unwind(error)) => Err(error),
    }
}

fn sessions<'a>(caller: &'a mut C<'_>) -> &'a mut Sessions {
    &mut caller.data_mut().host.sessions
}

/// Refuses every call but `cchat_last_error` from a guest tool callback.
fn ready<'a>(c: &'a mut C<'_>, call: &str) -> Result<&'a mut Sessions, CallError> {
    let sessions = sessions(c);
    sessions.not_in_callback(call)?;
    Ok(sessions)
}

fn set_param(
    c: &mut C<'_>,
    handle: i32,
    key: (u32, u32),
    value: (u32, u32),
) -> Result<i32, CallError> {
    let key = read_str(c, key.0, key.1)?;
    let value = read(c, value.0, value.1)?;
    ready(c, "cchat_ctl_set_param")?.set_param(handle, &key, &value)?;
    Ok(0)
}

fn get_param(
    c: &mut C<'_>,
    handle: i32,
    key: (u32, u32),
    out: (u32, u32),
) -> Result<i32, CallError> {
    let key = read_str(c, key.0, key.1)?;
    let value = ready(c, "cchat_ctl_get_param")?.get_param(handle, &key)?;
    write_out(c, out.0, out.1, value.as_bytes())?;
    Ok(0)
}

fn write_msg(
    c: &mut C<'_>,
    handle: i32,
    role: (u32, u32),
    text: (u32, u32),
) -> Result<i32, CallError> {
    let role = read_str(c, role.0, role.1)?;
    let text = read_str(c, text.0, text.1)?;
    ready(c, "cchat_write_msg")?.write_msg(handle, &role, &text)?;
    Ok(0)
}

fn write_fn(c: &mut C<'_>, handle: i32, spec: (u32, u32)) -> Result<i32, CallError> {
    let spec = read(c, spec.0, spec.1)?;
    ready(c, "cchat_write_fn")?;
    if dispatcher_exports(c).is_none() {
        return Err(CallError::refused(
            EINVAL,
            format!("{}, so the node cannot call its tools; register tools with spear-guest's Chat::tool", missing_exports()),
        ));
    }
    sessions(c).write_fn(handle, &spec)
}

/// `cchat_send`: the session's send, with guest tool callbacks through
/// this guest's store (see `send.rs` and `dispatch.rs`).
async fn send(c: &mut C<'_>, handle: i32, flags: u32) -> Result<i32, CallError> {
    let mut job = sessions(c).begin_send(handle, flags)?;
    let mut dispatcher = Dispatcher {
        caller: c,
        stopped: None,
    };
    let outcome = job.run(&mut dispatcher).await;
    let stopped = dispatcher.stopped.take();
    let result = sessions(c).finish_send(job, outcome);
    if let Some(error) = stopped {
        return Err(CallError::Unwind(error));
    }
    result.map(|()| 0)
}

async fn call_tool(
    c: &mut C<'_>,
    handle: i32,
    call: (u32, u32),
    out: (u32, u32),
) -> Result<i32, CallError> {
    let call = read(c, call.0, call.1)?;
    let result = sessions(c).call_tool(handle, &call).await?;
    match write_out(c, out.0, out.1, &result) {
        Err(MemoryError::BufferTooSmall) => {
            sessions(c).keep_result(handle, call, result);
            Err(MemoryError::BufferTooSmall.into())
        }
        other => other.map(|()| 0).map_err(CallError::from),
    }
}

fn recv(c: &mut C<'_>, handle: i32, out: (u32, u32)) -> Result<i32, CallError> {
    // Copied out so guest memory can be borrowed; bounded by the budget.
    let reply = ready(c, "cchat_recv")?.reply(handle)?.to_vec();
    write_out(c, out.0, out.1, &reply)?;
    Ok(0)
}

fn last_error(c: &mut C<'_>, out: (u32, u32)) -> Result<i32, CallError> {
    let sentence = c.data().host.last_error.clone().unwrap_or_default();
    write_out(c, out.0, out.1, sentence.as_bytes())?;
    Ok(0)
}

/// Adds the cchat functions to `linker`.
pub fn add_to_linker(linker: &mut Linker<ChatState>) -> wasmtime::Result<()> {
    linker.func_wrap("spear", "cchat_create", |mut c: C<'_>| {
        let result = ready(&mut c, "cchat_create").and_then(Sessions::create);
        code(&mut c, result)
    })?;
    linker.func_wrap(
        "spear",
        "cchat_ctl_set_param",
        |mut c: C<'_>, h: i32, k: u32, kl: u32, v: u32, vl: u32| {
            let result = set_param(&mut c, h, (k, kl), (v, vl));
            code(&mut c, result)
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_ctl_get_param",
        |mut c: C<'_>, h: i32, k: u32, kl: u32, o: u32, ol: u32| {
            let result = get_param(&mut c, h, (k, kl), (o, ol));
            code(&mut c, result)
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_write_msg",
        |mut c: C<'_>, h: i32, r: u32, rl: u32, t: u32, tl: u32| {
            let result = write_msg(&mut c, h, (r, rl), (t, tl));
            code(&mut c, result)
        },
    )?;
    linker.func_wrap_async(
        "spear",
        "cchat_send",
        |mut c: C<'_>, (h, flags): (i32, u32)| {
            Box::new(async move {
                let result = send(&mut c, h, flags).await;
                code(&mut c, result)
            })
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_write_fn",
        |mut c: C<'_>, h: i32, s: u32, sl: u32| {
            let result = write_fn(&mut c, h, (s, sl));
            code(&mut c, result)
        },
    )?;
    linker.func_wrap_async(
        "spear",
        "cchat_call_tool",
        |mut c: C<'_>, (h, call, call_len, out, out_len): (i32, u32, u32, u32, u32)| {
            Box::new(async move {
                let result = call_tool(&mut c, h, (call, call_len), (out, out_len)).await;
                code(&mut c, result)
            })
        },
    )?;
    linker.func_wrap(
        "spear",
        "cchat_recv",
        |mut c: C<'_>, h: i32, o: u32, ol: u32| {
            let result = recv(&mut c, h, (o, ol));
            code(&mut c, result)
        },
    )?;
    linker.func_wrap("spear", "cchat_close", |mut c: C<'_>, h: i32| {
        let result = ready(&mut c, "cchat_close").and_then(|s| s.close(h).map(|()| 0));
        code(&mut c, result)
    })?;
    linker.func_wrap(
        "spear",
        "cchat_last_error",
        |mut c: C<'_>, o: u32, ol: u32| {
            let result = last_error(&mut c, (o, ol));
            code(&mut c, result)
        },
    )?;
    Ok(())
}
