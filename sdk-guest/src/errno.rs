//! The errno values of the host API (Linux numbering), shared by the SDK
//! and the node's host functions so both sides of the ABI agree.

pub const ENOENT: i32 = 2;
pub const EBADF: i32 = 9;
pub const EACCES: i32 = 13;
pub const EFAULT: i32 = 14;
pub const EINVAL: i32 = 22;
pub const EMFILE: i32 = 24;
pub const ENOSPC: i32 = 28;
pub const ENOSYS: i32 = 38;
pub const EIO: i32 = 5;
/// The run's host-memory budget has no room (limits.host_memory_mb).
pub const ENOMEM: i32 = 12;
/// A run budget is spent: model requests, tokens or tool calls.
pub const EDQUOT: i32 = 122;
/// A fleet quota is spent until it refills (docs/quotas.md): try later.
pub const EAGAIN: i32 = 11;
pub const ETIMEDOUT: i32 = 110;
/// A cchat call made from inside a guest tool callback, where only
/// `cchat_last_error` may be called.
pub const EBUSY: i32 = 16;
/// Two guest tools of one session with the same name.
pub const EEXIST: i32 = 17;
/// The model's answer is not the JSON `response_format` asked for.
pub const EBADMSG: i32 = 74;
