//! Guests written in WAT against the guest ABI (docs/guest-api.md): modules that open one
//! session, set or read one param and exit with what the node answered (the -errno, and where
//! they print, the sentence or the value); and a module importing the cchat calls around a
//! body of the test's own.

/// A guest that writes `key = value` (JSON) in a new session and exits with
/// the write's -errno (0 when it was accepted).
pub fn write_param(key: &str, value: &str) -> String {
    format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_ctl_set_param" (func $set (param i32 i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "{key}")
        (data (i32.const 100) "{}")
        (func (export "_start")
          (call $exit (i32.sub (i32.const 0)
            (call $set (call $create) (i32.const 0) (i32.const {}) (i32.const 100) (i32.const {}))))))"#,
        value.replace('"', "\\\""),
        key.len(),
        value.len()
    )
}

/// The import every module here exits with (`$exit`).
pub const EXIT: &str = r#"(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))"#;

/// A guest whose `set_param(key, value)` is refused, then copies
/// `cchat_last_error` to stdout and exits with the refusal's errno.
pub fn refused_then_last_error(key: &str, value: &str) -> String {
    format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_ctl_set_param" (func $set (param i32 i32 i32 i32 i32) (result i32)))
        (import "spear" "cchat_last_error" (func $last (param i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "{key}")
        (data (i32.const 100) "{}")
        (func (export "_start") (local $errno i32)
          (local.set $errno (i32.sub (i32.const 0)
            (call $set (call $create) (i32.const 0) (i32.const {}) (i32.const 100) (i32.const {}))))
          ;; capacity 4096 at 1000, sentence at 2000
          (i32.store (i32.const 1000) (i32.const 4096))
          (drop (call $last (i32.const 2000) (i32.const 1000)))
          ;; iovec at 1100: (2000, len)
          (i32.store (i32.const 1100) (i32.const 2000))
          (i32.store (i32.const 1104) (i32.load (i32.const 1000)))
          (drop (call $fd_write (i32.const 1) (i32.const 1100) (i32.const 1) (i32.const 1200)))
          (call $exit (local.get $errno))))"#,
        value.replace('"', "\\\""),
        key.len(),
        value.len()
    )
}

/// A guest that reads param `key` in a new session and prints its JSON.
pub fn print_param(key: &str) -> String {
    format!(
        r#"(module {EXIT}
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_ctl_get_param" (func $get (param i32 i32 i32 i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "{key}")
        (func (export "_start") (local $errno i32)
          ;; capacity 4096 at 1000, the value at 2000
          (i32.store (i32.const 1000) (i32.const 4096))
          (local.set $errno (i32.sub (i32.const 0)
            (call $get (call $create) (i32.const 0) (i32.const {}) (i32.const 2000) (i32.const 1000))))
          (i32.store (i32.const 1100) (i32.const 2000))
          (i32.store (i32.const 1104) (i32.load (i32.const 1000)))
          (drop (call $fd_write (i32.const 1) (i32.const 1100) (i32.const 1) (i32.const 1200)))
          (call $exit (local.get $errno))))"#,
        key.len()
    )
}

/// A WAT module importing the cchat functions it names.
pub fn wat(body: &str) -> String {
    format!(
        r#"(module
  (import "spear" "cchat_create" (func $create (result i32)))
  (import "spear" "cchat_close" (func $close (param i32) (result i32)))
  (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
  (import "spear" "cchat_send" (func $send (param i32 i32) (result i32)))
  (memory (export "memory") 20)
  (data (i32.const 1200000) "user")
  (data (i32.const 1200008) "Read notes.txt, please.")
  {body})"#
    )
}
