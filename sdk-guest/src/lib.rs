//! The guest SDK for Spear WASM agents.
//!
//! A [`Chat`] is one chat session on the node: narrow its MCP servers and
//! tools with [`Chat::set_param`] (the node refuses widening with
//! [`Error::PermissionDenied`]), add messages, and [`Chat::send`] to let the
//! model answer, calling the allowed MCP tools as it goes. The session is
//! closed when the `Chat` is dropped.

pub mod errno;
pub mod raw;

pub use serde_json::{json, Value};

/// Why a host call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The task does not allow this (EACCES).
    PermissionDenied,
    /// A malformed argument (EINVAL).
    InvalidArgument,
    /// No such param (ENOENT).
    NotFound,
    /// The session is closed or unknown (EBADF).
    BadHandle,
    /// Too many open sessions (EMFILE).
    TooManySessions,
    /// The session deadline passed (ETIMEDOUT).
    Timeout,
    /// The model provider or the loop failed (EIO); details are in the reply.
    Io,
    /// Not running on a Spear node (ENOSYS).
    Unsupported,
    /// The run's host-memory budget has no room (ENOMEM): close sessions you
    /// no longer need. Asking again without freeing stops the run.
    OutOfHostMemory,
    /// A run budget (model requests, tokens, tool calls) is spent (EDQUOT);
    /// the reply says which. Sending again stops the run.
    BudgetSpent,
    /// Any other errno.
    Other(i32),
}

impl Error {
    fn from_errno(code: i32) -> Error {
        match -code {
            errno::EACCES => Error::PermissionDenied,
            errno::EINVAL | errno::EFAULT => Error::InvalidArgument,
            errno::ENOENT => Error::NotFound,
            errno::EBADF => Error::BadHandle,
            errno::EMFILE => Error::TooManySessions,
            errno::ETIMEDOUT => Error::Timeout,
            errno::EIO => Error::Io,
            errno::ENOSYS => Error::Unsupported,
            errno::ENOMEM => Error::OutOfHostMemory,
            errno::EDQUOT => Error::BudgetSpent,
            other => Error::Other(other),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Error {}

fn check(code: i32) -> Result<i32, Error> {
    if code < 0 {
        Err(Error::from_errno(code))
    } else {
        Ok(code)
    }
}

/// Calls a host function that writes into a buffer, growing it on ENOSPC.
fn read_buffer(mut call: impl FnMut(*mut u8, *mut u32) -> i32) -> Result<Vec<u8>, Error> {
    let mut buffer = vec![0u8; 4096];
    loop {
        let mut len = buffer.len() as u32;
        let code = call(buffer.as_mut_ptr(), &mut len);
        if code == -errno::ENOSPC && len as usize > buffer.len() {
            buffer.resize(len as usize, 0);
            continue;
        }
        check(code)?;
        buffer.truncate(len as usize);
        return Ok(buffer);
    }
}

/// The answer of [`Chat::send`].
#[derive(Debug, Clone)]
pub struct Reply {
    /// The model's final text.
    pub content: String,
    /// Every tool call made, as JSON objects (server, tool, outcome, ...).
    pub trace: Vec<Value>,
    /// The whole reply as the host sent it.
    pub raw: Value,
}

/// The session's MCP params, built up and written with [`Chat::apply`]:
///
/// ```no_run
/// # use spear_guest::{Chat, McpParams};
/// let chat = Chat::new()?;
/// chat.apply(&McpParams::new().servers(&["fs"]).allow(&["read_*"]).deny(&["read_media_*"]))?;
/// # Ok::<(), spear_guest::Error>(())
/// ```
///
/// Each param can only narrow what the task allows; a write that would
/// widen it fails with [`Error::PermissionDenied`] and changes nothing
/// (writes before it in the same `apply` stay, and they only narrowed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpParams {
    enabled: Option<bool>,
    servers: Option<Vec<String>>,
    allow: Option<Vec<String>>,
    deny: Option<Vec<String>>,
}

impl McpParams {
    pub fn new() -> Self {
        Self::default()
    }

    /// `mcp.enabled`.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = Some(enabled);
        self
    }

    /// `mcp.server_ids`: a subset of the task's allowed servers.
    pub fn servers(mut self, ids: &[&str]) -> Self {
        self.servers = Some(ids.iter().map(|s| s.to_string()).collect());
        self
    }

    /// `mcp.tool_allowlist`.
    pub fn allow(mut self, patterns: &[&str]) -> Self {
        self.allow = Some(patterns.iter().map(|s| s.to_string()).collect());
        self
    }

    /// `mcp.tool_denylist`.
    pub fn deny(mut self, patterns: &[&str]) -> Self {
        self.deny = Some(patterns.iter().map(|s| s.to_string()).collect());
        self
    }

    /// The `(key, value)` writes, in a fixed order.
    pub fn writes(&self) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if let Some(enabled) = self.enabled {
            out.push(("mcp.enabled", json!(enabled)));
        }
        if let Some(ids) = &self.servers {
            out.push(("mcp.server_ids", json!(ids)));
        }
        if let Some(allow) = &self.allow {
            out.push(("mcp.tool_allowlist", json!(allow)));
        }
        if let Some(deny) = &self.deny {
            out.push(("mcp.tool_denylist", json!(deny)));
        }
        out
    }
}

/// One chat session on the node; closed on drop.
pub struct Chat {
    handle: i32,
}

impl Chat {
    /// Opens a session with the task's defaults.
    pub fn new() -> Result<Chat, Error> {
        // SAFETY: no pointers are passed.
        let handle = check(unsafe { raw::cchat_create() })?;
        Ok(Chat { handle })
    }

    /// Sets a session param (`mcp.server_ids`, `mcp.tool_allowlist`, ...).
    pub fn set_param(&self, key: &str, value: &Value) -> Result<(), Error> {
        let value = value.to_string();
        // SAFETY: the pointers and lengths describe live slices.
        check(unsafe {
            raw::cchat_ctl_set_param(
                self.handle,
                key.as_ptr(),
                key.len() as u32,
                value.as_ptr(),
                value.len() as u32,
            )
        })?;
        Ok(())
    }

    /// Reads a param (session or task).
    pub fn get_param(&self, key: &str) -> Result<Value, Error> {
        let bytes = read_buffer(|out, len| {
            // SAFETY: `out` has `*len` writable bytes; the host writes at most that.
            unsafe {
                raw::cchat_ctl_get_param(self.handle, key.as_ptr(), key.len() as u32, out, len)
            }
        })?;
        serde_json::from_slice(&bytes).map_err(|_| Error::InvalidArgument)
    }

    /// Limits this session to these MCP servers (a subset of the task's).
    pub fn use_servers(&self, ids: &[&str]) -> Result<(), Error> {
        self.set_param("mcp.server_ids", &json!(ids))
    }

    /// Only tools matching one of these patterns (`*` and `?` globs).
    pub fn allow_tools(&self, patterns: &[&str]) -> Result<(), Error> {
        self.set_param("mcp.tool_allowlist", &json!(patterns))
    }

    /// Never these tools, whatever else allows them.
    pub fn deny_tools(&self, patterns: &[&str]) -> Result<(), Error> {
        self.set_param("mcp.tool_denylist", &json!(patterns))
    }

    /// No MCP tools for this session (the model answers on its own).
    pub fn disable_mcp(&self) -> Result<(), Error> {
        self.set_param("mcp.enabled", &json!(false))
    }

    /// Applies several MCP params at once; see [`McpParams`].
    pub fn apply(&self, params: &McpParams) -> Result<(), Error> {
        for (key, value) in params.writes() {
            self.set_param(key, &value)?;
        }
        Ok(())
    }

    /// Adds a message (`system` or `user`).
    pub fn write(&self, role: &str, text: &str) -> Result<(), Error> {
        // SAFETY: the pointers and lengths describe live slices.
        check(unsafe {
            raw::cchat_write_msg(
                self.handle,
                role.as_ptr(),
                role.len() as u32,
                text.as_ptr(),
                text.len() as u32,
            )
        })?;
        Ok(())
    }

    /// Lets the model answer, running the allowed MCP tools it calls.
    pub fn send(&self) -> Result<Reply, Error> {
        // SAFETY: no pointers are passed.
        let sent = check(unsafe { raw::cchat_send(self.handle, 1) });
        let bytes = read_buffer(|out, len| {
            // SAFETY: as above.
            unsafe { raw::cchat_recv(self.handle, out, len) }
        })?;
        let raw: Value = serde_json::from_slice(&bytes).map_err(|_| Error::InvalidArgument)?;
        sent?;
        Ok(Reply {
            content: raw["content"].as_str().unwrap_or_default().to_string(),
            trace: raw["trace"].as_array().cloned().unwrap_or_default(),
            raw,
        })
    }
}

impl Drop for Chat {
    fn drop(&mut self) {
        // SAFETY: no pointers are passed.
        unsafe {
            raw::cchat_close(self.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_wasm_every_call_is_unsupported() {
        assert_eq!(Chat::new().err(), Some(Error::Unsupported));
        assert_eq!(Error::from_errno(-13), Error::PermissionDenied);
        assert_eq!(Error::from_errno(-110), Error::Timeout);
    }

    #[test]
    fn mcp_params_write_only_what_was_set() {
        let params = McpParams::new().servers(&["fs"]).deny(&["write_*"]);
        assert_eq!(
            params.writes(),
            vec![
                ("mcp.server_ids", json!(["fs"])),
                ("mcp.tool_denylist", json!(["write_*"]))
            ]
        );
        assert!(McpParams::new().writes().is_empty());
    }
}
