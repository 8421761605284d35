//! The guest side of guest tools: the closures registered with
//! [`crate::Chat::tool`], and the two exports the node calls back into
//! during a send (docs/guest-api.md, "guest tools"):
//!
//! - `spear_alloc(len) -> ptr`: a buffer the node writes a call's
//!   arguments into (kept until the next call);
//! - `spear_tool_call(fn_id, args, args_len, out) -> 0 | 1`: runs the
//!   tool registered as `fn_id`, writes its result's `(ptr, len)` at `out`
//!   (the result stays alive until the next call), and returns 0, or 1 when
//!   the tool failed (its text is the error the model sees).
//!
//! A guest is single-threaded, so the registry is a thread-local.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::Value;

/// A guest tool's body: the model's arguments in, the result text out
/// (`Err` is an error result the model sees).
pub type ToolFn = Box<dyn FnMut(Value) -> Result<String, String>>;

#[derive(Default)]
struct Registry {
    tools: HashMap<i32, ToolFn>,
    /// Where the node writes the next call's arguments.
    arguments: Vec<u8>,
    /// The last result, alive until the next call.
    result: Vec<u8>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// Keeps `body` for calls of `fn_id`.
pub(crate) fn register(fn_id: i32, body: ToolFn) {
    REGISTRY.with(|r| r.borrow_mut().tools.insert(fn_id, body));
}

/// Drops the tools of a closed session.
pub(crate) fn unregister(fn_ids: &[i32]) {
    REGISTRY.with(|r| {
        let mut registry = r.borrow_mut();
        for id in fn_ids {
            registry.tools.remove(id);
        }
    });
}

/// Runs tool `fn_id` on `arguments`; `(is_error, text)`.
fn run(fn_id: i32, arguments: &[u8]) -> (bool, String) {
    // The body runs outside the borrow, so it may register tools or open
    // sessions of its own (the node refuses cchat calls from here anyway).
    let body = REGISTRY.with(|r| r.borrow_mut().tools.remove(&fn_id));
    let Some(mut body) = body else {
        return (true, format!("this guest has no tool with id {fn_id}"));
    };
    let outcome = match serde_json::from_slice::<Value>(arguments) {
        Ok(args) => body(args),
        Err(e) => Err(format!("the arguments are not JSON: {e}")),
    };
    REGISTRY.with(|r| r.borrow_mut().tools.insert(fn_id, body));
    match outcome {
        Ok(text) => (false, text),
        Err(text) => (true, text),
    }
}

/// `spear_alloc`: see the module docs.
#[no_mangle]
pub extern "C" fn spear_alloc(len: u32) -> *mut u8 {
    REGISTRY.with(|r| {
        let mut registry = r.borrow_mut();
        registry.arguments = vec![0; len as usize];
        registry.arguments.as_mut_ptr()
    })
}

/// `spear_tool_call`: see the module docs.
///
/// # Safety
///
/// `args` points to `args_len` bytes inside the buffer `spear_alloc` gave
/// the node, and `out` to 8 writable bytes; the node guarantees both.
#[no_mangle]
pub unsafe extern "C" fn spear_tool_call(
    fn_id: i32,
    args: *const u8,
    args_len: u32,
    out: *mut u8,
) -> i32 {
    // SAFETY: the caller's contract above.
    let arguments = unsafe { std::slice::from_raw_parts(args, args_len as usize) }.to_vec();
    let (is_error, text) = run(fn_id, &arguments);
    let (ptr, len) = REGISTRY.with(|r| {
        let mut registry = r.borrow_mut();
        registry.result = text.into_bytes();
        (
            registry.result.as_ptr() as u32,
            registry.result.len() as u32,
        )
    });
    let mut slot = [0u8; 8];
    slot[..4].copy_from_slice(&ptr.to_le_bytes());
    slot[4..].copy_from_slice(&len.to_le_bytes());
    // SAFETY: `out` has 8 writable bytes (the caller's contract).
    unsafe { std::ptr::copy_nonoverlapping(slot.as_ptr(), out, 8) };
    i32::from(is_error)
}
