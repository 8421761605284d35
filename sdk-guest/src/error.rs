//! Why a host call failed: the errno's kind, plus the node's own sentence
//! (from `cchat_last_error`, or a failed send's reply), so a guest author
//! sees what the node saw, not just a code.

use std::fmt;

use crate::errno;

/// The class of a failure, from the host call's errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The task does not allow this (EACCES).
    PermissionDenied,
    /// A malformed argument, or one outside guest memory (EINVAL, EFAULT).
    InvalidArgument,
    /// No such param, or no reply yet (ENOENT).
    NotFound,
    /// The session is closed or unknown (EBADF).
    BadHandle,
    /// Too many open sessions (EMFILE).
    TooManySessions,
    /// The session already holds the most messages it may (ENOSPC).
    SessionFull,
    /// The session deadline passed (ETIMEDOUT).
    Timeout,
    /// The model provider or the loop failed (EIO).
    Io,
    /// Not running on a Spear node (ENOSYS).
    Unsupported,
    /// The run's host-memory budget has no room (ENOMEM): close sessions you
    /// no longer need. Asking again without freeing stops the run.
    OutOfHostMemory,
    /// A run budget (model requests, tokens, tool calls) is spent (EDQUOT).
    /// Sending again stops the run.
    BudgetSpent,
    /// A fleet quota of the task or server is spent until it refills
    /// (EAGAIN); the sentence says when.
    QuotaSpent,
    /// A cchat call from inside a guest tool callback, where only
    /// `cchat_last_error` is allowed (EBUSY): return the tool's result first.
    Busy,
    /// A guest tool of this session already has that name (EEXIST).
    AlreadyExists,
    /// The model's answer is not the JSON the session asked for (EBADMSG).
    BadMessage,
    /// Any other errno.
    Other(i32),
}

impl ErrorKind {
    /// The kind of a negative host return code.
    pub fn from_code(code: i32) -> ErrorKind {
        match code.saturating_neg() {
            errno::EACCES => ErrorKind::PermissionDenied,
            errno::EINVAL | errno::EFAULT => ErrorKind::InvalidArgument,
            errno::ENOENT => ErrorKind::NotFound,
            errno::EBADF => ErrorKind::BadHandle,
            errno::EMFILE => ErrorKind::TooManySessions,
            errno::ENOSPC => ErrorKind::SessionFull,
            errno::ETIMEDOUT => ErrorKind::Timeout,
            errno::EIO => ErrorKind::Io,
            errno::ENOSYS => ErrorKind::Unsupported,
            errno::ENOMEM => ErrorKind::OutOfHostMemory,
            errno::EDQUOT => ErrorKind::BudgetSpent,
            errno::EAGAIN => ErrorKind::QuotaSpent,
            errno::EBUSY => ErrorKind::Busy,
            errno::EEXIST => ErrorKind::AlreadyExists,
            errno::EBADMSG => ErrorKind::BadMessage,
            other => ErrorKind::Other(other),
        }
    }

    fn describe(self) -> String {
        match self {
            ErrorKind::PermissionDenied => "the task does not allow this".into(),
            ErrorKind::InvalidArgument => "an argument is malformed".into(),
            ErrorKind::NotFound => "not found".into(),
            ErrorKind::BadHandle => "the session is closed or unknown".into(),
            ErrorKind::TooManySessions => "too many open sessions".into(),
            ErrorKind::SessionFull => "the session holds the most messages it may".into(),
            ErrorKind::Timeout => "the session deadline passed".into(),
            ErrorKind::Io => "the model provider or the tool loop failed".into(),
            ErrorKind::Unsupported => "not running on a Spear node".into(),
            ErrorKind::OutOfHostMemory => "the run's host memory budget is spent".into(),
            ErrorKind::BudgetSpent => "a run budget is spent".into(),
            ErrorKind::QuotaSpent => "a fleet quota is spent until it refills".into(),
            ErrorKind::Busy => "not allowed inside a guest tool callback".into(),
            ErrorKind::AlreadyExists => "a guest tool with that name exists".into(),
            ErrorKind::BadMessage => "the model's answer is not the JSON asked for".into(),
            ErrorKind::Other(errno) => format!("the host returned errno {errno}"),
        }
    }
}

/// A failed host call: its [`ErrorKind`] and the node's sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with the node's `message` (empty if it gave none).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The node's sentence, or empty when it gave none.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    /// The node's sentence when there is one, else what the errno means.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.kind.describe())
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_prefers_the_nodes_sentence() {
        let told = Error::new(
            ErrorKind::PermissionDenied,
            "mcp.server_ids may only narrow the task's servers",
        );
        assert_eq!(
            told.to_string(),
            "mcp.server_ids may only narrow the task's servers"
        );
        let bare = Error::new(ErrorKind::from_code(-110), "");
        assert_eq!(bare.kind(), ErrorKind::Timeout);
        assert_eq!(bare.to_string(), "the session deadline passed");
        assert_eq!(ErrorKind::from_code(-13), ErrorKind::PermissionDenied);
        assert_eq!(ErrorKind::from_code(i32::MIN), ErrorKind::Other(i32::MAX));
    }
}
