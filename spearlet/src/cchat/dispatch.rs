//! Calling a guest tool: the host side of the guest's exported dispatcher
//! (docs/guest-api.md, "guest tools"). For one call the node asks the
//! guest for a buffer (`spear_alloc(8 + len)`), writes the arguments after
//! an 8-byte slot, calls `spear_tool_call(fn_id, args, len, slot)`, and
//! reads the result's `(ptr, len)` from the slot, bounds-checked, before
//! copying it. Arguments and results are each at most [`MAX_RESULT_BYTES`]:
//! past that the model is told so and the guest is not called, or its
//! result not copied.
//!
//! The callback runs under the run's own limits (CPU, wall clock, memory;
//! the epoch callback sees it like any guest code). A trap, a limit, or a
//! dispatcher that breaks the contract ends the whole run with a clear
//! reason: [`Dispatcher::stopped`] holds the error the host API unwinds
//! the guest with.

use async_trait::async_trait;
use spear_guest::calls::exports;
use tracing::Instrument;
use wasmtime::{Caller, Extern, TypedFunc};

use super::guest_tools::{GuestCallbacks, GuestResult, GuestStopped, GuestTool, MAX_RESULT_BYTES};
use super::limits::ChatStop;
use super::state::ChatState;
use crate::wasm::describe;

type Alloc = TypedFunc<u32, u32>;
type ToolCall = TypedFunc<(i32, u32, u32, u32), i32>;

/// The module's `spear_alloc` and `spear_tool_call`, when it exports both
/// with the signatures the node calls them with.
pub fn dispatcher_exports(caller: &mut Caller<'_, ChatState>) -> Option<(Alloc, ToolCall)> {
    let alloc = caller.get_export(exports::ALLOC)?.into_func()?;
    let call = caller.get_export(exports::TOOL_CALL)?.into_func()?;
    Some((alloc.typed(&*caller).ok()?, call.typed(&*caller).ok()?))
}

/// What a module without usable dispatcher exports lacks, in one sentence.
pub fn missing_exports() -> String {
    format!(
        "the module does not export {}(u32) -> u32 and {}(i32, u32, u32, u32) -> i32",
        exports::ALLOC,
        exports::TOOL_CALL
    )
}

/// Guest tool calls through one guest's store.
pub struct Dispatcher<'a, 'b> {
    pub caller: &'a mut Caller<'b, ChatState>,
    /// Why the run must end, once a callback failed.
    pub stopped: Option<wasmtime::Error>,
}

impl Dispatcher<'_, '_> {
    /// Ends the run: `error` as the guest raised it when it exited, else
    /// a [`ChatStop::GuestTool`] naming the tool.
    fn stop(&mut self, tool: &str, error: wasmtime::Error) -> GuestStopped {
        match describe(&error) {
            (Some(code), _) => {
                self.stopped = Some(error);
                GuestStopped {
                    tool: tool.to_string(),
                    why: format!("it exited with code {code}"),
                }
            }
            (None, why) => self.broken(tool, why.unwrap_or_default()),
        }
    }

    /// Ends the run with a [`ChatStop::GuestTool`] saying `why`.
    fn broken(&mut self, tool: &str, why: String) -> GuestStopped {
        self.stopped = Some(wasmtime::Error::new(
            ChatStop::GuestTool {
                tool: tool.to_string(),
                why: why.clone(),
            }
            .into_stop(),
        ));
        GuestStopped {
            tool: tool.to_string(),
            why,
        }
    }

    async fn run(
        &mut self,
        tool: &GuestTool,
        arguments: &str,
    ) -> Result<GuestResult, GuestStopped> {
        let name = tool.spec.name.as_str();
        let caller = &mut *self.caller;
        let Some((alloc, call)) = dispatcher_exports(caller) else {
            return Err(self.broken(name, missing_exports()));
        };
        let Some(memory) = caller.get_export("memory").and_then(Extern::into_memory) else {
            return Err(self.broken(name, "the module exports no memory".into()));
        };
        let args = arguments.as_bytes();
        // The model's arguments are the model's: too large ones are its
        // error to see, not a reason to fill the guest's memory.
        if args.len() > MAX_RESULT_BYTES {
            return Ok(GuestResult {
                text: format!(
                    "the arguments are {} bytes, over the {MAX_RESULT_BYTES} a guest tool takes",
                    args.len()
                ),
                is_error: true,
            });
        }
        let size = 8 + args.len() as u32;
        let slot = match alloc.call_async(&mut *caller, size).await {
            Ok(slot) => slot,
            Err(error) => return Err(self.stop(name, error)),
        };
        let caller = &mut *self.caller;
        let range = slot as usize..slot as usize + size as usize;
        match memory.data_mut(&mut *caller).get_mut(range) {
            Some(buffer) => {
                buffer[..8].fill(0);
                buffer[8..].copy_from_slice(args);
            }
            None => {
                return Err(self.broken(
                    name,
                    format!("{} returned a buffer outside its memory", exports::ALLOC),
                ))
            }
        }
        let code = match call
            .call_async(
                &mut *caller,
                (tool.fn_id, slot + 8, args.len() as u32, slot),
            )
            .await
        {
            Ok(code) => code,
            Err(error) => return Err(self.stop(name, error)),
        };
        let caller = &mut *self.caller;
        let data = memory.data(&*caller);
        let word = |at: usize| {
            data.get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let (Some(ptr), Some(len)) = (word(slot as usize), word(slot as usize + 4)) else {
            return Err(self.broken(name, "the result slot moved outside its memory".into()));
        };
        if code != 0 && code != 1 {
            return Err(self.broken(
                name,
                format!(
                    "{} returned {code}; 0 (ok) and 1 (the tool failed) are its answers",
                    exports::TOOL_CALL
                ),
            ));
        }
        if len > MAX_RESULT_BYTES {
            return Ok(GuestResult {
                text: format!("guest tool '{name}' returned {len} bytes, over the {MAX_RESULT_BYTES} a tool result may be"),
                is_error: true,
            });
        }
        let Some(bytes) = ptr.checked_add(len).and_then(|end| data.get(ptr..end)) else {
            return Err(self.broken(name, "its result points outside its memory".into()));
        };
        Ok(GuestResult {
            text: String::from_utf8_lossy(bytes).into_owned(),
            is_error: code == 1,
        })
    }
}

#[async_trait]
impl GuestCallbacks for Dispatcher<'_, '_> {
    async fn call(
        &mut self,
        tool: &GuestTool,
        arguments: &str,
    ) -> Result<GuestResult, GuestStopped> {
        let span = tracing::info_span!("guest_tool", tool = %tool.spec.name);
        self.run(tool, arguments).instrument(span).await
    }
}
