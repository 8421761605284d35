//! The raw imports of module `spear` (see docs/guest-api.md). Off wasm, every
//! function returns `-ENOSYS`, so host `cargo test` builds and runs.
//!
//! # Safety
//!
//! Every pointer passed must point to at least the given number of valid
//! bytes (writable for outputs), and `out_len` to a writable `u32` holding
//! the output buffer's capacity. The host checks bounds against guest memory
//! either way; these rules keep the guest's own memory sound.

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "spear")]
extern "C" {
    pub fn cchat_create() -> i32;
    pub fn cchat_ctl_set_param(
        handle: i32,
        key: *const u8,
        key_len: u32,
        value: *const u8,
        value_len: u32,
    ) -> i32;
    pub fn cchat_ctl_get_param(
        handle: i32,
        key: *const u8,
        key_len: u32,
        out: *mut u8,
        out_len: *mut u32,
    ) -> i32;
    pub fn cchat_write_msg(
        handle: i32,
        role: *const u8,
        role_len: u32,
        text: *const u8,
        text_len: u32,
    ) -> i32;
    pub fn cchat_send(handle: i32, flags: u32) -> i32;
    pub fn cchat_recv(handle: i32, out: *mut u8, out_len: *mut u32) -> i32;
    pub fn cchat_close(handle: i32) -> i32;
    pub fn cchat_last_error(out: *mut u8, out_len: *mut u32) -> i32;
    pub fn cchat_write_fn(handle: i32, spec: *const u8, spec_len: u32) -> i32;
    pub fn cchat_call_tool(
        handle: i32,
        call: *const u8,
        call_len: u32,
        out: *mut u8,
        out_len: *mut u32,
    ) -> i32;
}

#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::missing_safety_doc)]
mod stubs {
    use super::super::errno::ENOSYS;

    pub unsafe fn cchat_create() -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_ctl_set_param(_: i32, _: *const u8, _: u32, _: *const u8, _: u32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_ctl_get_param(
        _: i32,
        _: *const u8,
        _: u32,
        _: *mut u8,
        _: *mut u32,
    ) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_write_msg(_: i32, _: *const u8, _: u32, _: *const u8, _: u32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_send(_: i32, _: u32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_recv(_: i32, _: *mut u8, _: *mut u32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_close(_: i32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_last_error(_: *mut u8, _: *mut u32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_write_fn(_: i32, _: *const u8, _: u32) -> i32 {
        -ENOSYS
    }
    pub unsafe fn cchat_call_tool(_: i32, _: *const u8, _: u32, _: *mut u8, _: *mut u32) -> i32 {
        -ENOSYS
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use stubs::*;
