//! The cchat host API, module `spear` (docs/guest-api.md): each function
//! reads its arguments out of guest memory (only through
//! [`crate::wasm::guest_memory`]), asks the run's [`Sessions`] to do the
//! work, and returns the ABI's value: zero or a handle, or a negative errno
//! whose sentence `cchat_last_error` hands back. A run stopped by a budget
//! is a trap. [`add_to_linker`] is the entry point.

use wasmtime::{Caller, Linker};

use super::sessions::{CallError, Sessions};
use crate::wasm::guest_memory::{read, read_str, write_out, MemoryError};
use crate::wasm::GuestState;

/// Longest sentence kept for `cchat_last_error`.
const MAX_SENTENCE: usize = 1024;

type C<'a> = Caller<'a, GuestState>;

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
            caller.data_mut().last_error = Some(kept);
            Ok(-errno)
        }
        Err(CallError::Stop(reason)) => Err(wasmtime::Error::new(reason)),
    }
}

fn sessions<'a>(caller: &'a mut C<'_>) -> &'a mut Sessions {
    &mut caller.data_mut().cchat
}

fn set_param(
    c: &mut C<'_>,
    handle: i32,
    key: (u32, u32),
    value: (u32, u32),
) -> Result<i32, CallError> {
    let key = read_str(c, key.0, key.1)?;
    let value = read(c, value.0, value.1)?;
    sessions(c).set_param(handle, &key, &value)?;
    Ok(0)
}

fn get_param(
    c: &mut C<'_>,
    handle: i32,
    key: (u32, u32),
    out: (u32, u32),
) -> Result<i32, CallError> {
    let key = read_str(c, key.0, key.1)?;
    let value = sessions(c).get_param(handle, &key)?;
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
    sessions(c).write_msg(handle, &role, &text)?;
    Ok(0)
}

fn recv(c: &mut C<'_>, handle: i32, out: (u32, u32)) -> Result<i32, CallError> {
    // Copied out so guest memory can be borrowed; bounded by the budget.
    let reply = sessions(c).reply(handle)?.to_vec();
    write_out(c, out.0, out.1, &reply)?;
    Ok(0)
}

fn last_error(c: &mut C<'_>, out: (u32, u32)) -> Result<i32, CallError> {
    let sentence = c.data().last_error.clone().unwrap_or_default();
    write_out(c, out.0, out.1, sentence.as_bytes())?;
    Ok(0)
}

/// Adds the cchat functions to `linker`.
pub fn add_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.func_wrap("spear", "cchat_create", |mut c: C<'_>| {
        let result = sessions(&mut c).create();
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
                let result = sessions(&mut c).send(h, flags).await.map(|()| 0);
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
        let result = sessions(&mut c).close(h).map(|()| 0);
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
