//! The guest SDK for Spear WASM agents.
//!
//! A [`Chat`] is one chat session on the node: narrow its MCP servers and
//! tools with [`Chat::apply`] (the node refuses widening with
//! [`ErrorKind::PermissionDenied`]), pick the model and its params with
//! [`Chat::set`], add tools of your own with [`Chat::tool`], add messages,
//! and [`Chat::send`] to let the model answer, calling the allowed tools as
//! it goes. Or drive the calls yourself: [`Chat::send_once`], then
//! [`Reply::tool_calls`], [`Chat::call_tool`] and [`Chat::answer`]. The
//! session is closed when the `Chat` is dropped. docs/guest-guide.md has a
//! page per pattern.

pub mod calls;
pub mod errno;
mod error;
mod guest_tools;
pub mod params;
pub mod raw;
pub mod reply;
pub mod request;

pub use calls::{AssistantCall, AssistantMessage, RequestedCall, ToolResult};
pub use error::{Error, ErrorKind};
pub use guest_tools::{spear_alloc, spear_tool_call};
pub use params::ToolSearch;
pub use reply::{FoundTool, Reply, SearchTrace, StopReason, ToolCall, Usage};
pub use request::{RequestParams, ResponseFormat, ToolChoice, ToolMode};
pub use serde_json::{json, Value};

/// A negative return code as an [`Error`] carrying the node's sentence.
fn failed(code: i32) -> Error {
    let message = read_buffer_raw(|out, len| {
        // SAFETY: `out` has `*len` writable bytes; the host writes at most that.
        unsafe { raw::cchat_last_error(out, len) }
    })
    .ok()
    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    .unwrap_or_default();
    Error::new(ErrorKind::from_code(code), message)
}

fn check(code: i32) -> Result<i32, Error> {
    if code < 0 {
        Err(failed(code))
    } else {
        Ok(code)
    }
}

/// Calls a host function that writes into a buffer, growing it on ENOSPC;
/// a failure is the bare return code.
fn read_buffer_raw(mut call: impl FnMut(*mut u8, *mut u32) -> i32) -> Result<Vec<u8>, i32> {
    let mut buffer = vec![0u8; 4096];
    loop {
        let mut len = buffer.len() as u32;
        let code = call(buffer.as_mut_ptr(), &mut len);
        if code == -errno::ENOSPC && len as usize > buffer.len() {
            buffer.resize(len as usize, 0);
            continue;
        }
        if code < 0 {
            return Err(code);
        }
        buffer.truncate(len as usize);
        return Ok(buffer);
    }
}

/// [`read_buffer_raw`] with failures as [`Error`]s.
fn read_buffer(call: impl FnMut(*mut u8, *mut u32) -> i32) -> Result<Vec<u8>, Error> {
    read_buffer_raw(call).map_err(failed)
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
/// widen it fails with [`ErrorKind::PermissionDenied`] and changes nothing
/// (writes before it in the same `apply` stay, and they only narrowed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpParams {
    enabled: Option<bool>,
    servers: Option<Vec<String>>,
    allow: Option<Vec<String>>,
    deny: Option<Vec<String>>,
    tool_search: Option<params::ToolSearch>,
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

    /// `mcp.tool_search`: a search over the session's tools instead of
    /// every definition (docs/guest-api.md, "Tool search").
    pub fn tool_search(mut self, mode: params::ToolSearch) -> Self {
        self.tool_search = Some(mode);
        self
    }

    /// The `(key, value)` writes, in a fixed order.
    pub fn writes(&self) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if let Some(enabled) = self.enabled {
            out.push((params::MCP_ENABLED, json!(enabled)));
        }
        if let Some(ids) = &self.servers {
            out.push((params::MCP_SERVER_IDS, json!(ids)));
        }
        if let Some(allow) = &self.allow {
            out.push((params::MCP_TOOL_ALLOWLIST, json!(allow)));
        }
        if let Some(deny) = &self.deny {
            out.push((params::MCP_TOOL_DENYLIST, json!(deny)));
        }
        if let Some(mode) = self.tool_search {
            out.push((params::MCP_TOOL_SEARCH, json!(mode)));
        }
        out
    }
}

/// One chat session on the node; closed on drop.
pub struct Chat {
    handle: i32,
    /// The ids of this session's guest tools, unregistered on drop.
    tools: std::cell::RefCell<Vec<i32>>,
}

fn not_json(what: &str, e: serde_json::Error) -> Error {
    Error::new(ErrorKind::InvalidArgument, format!("{what}: {e}"))
}

impl Chat {
    /// Opens a session with the task's defaults.
    pub fn new() -> Result<Chat, Error> {
        // SAFETY: no pointers are passed.
        let handle = check(unsafe { raw::cchat_create() })?;
        Ok(Chat {
            handle,
            tools: Default::default(),
        })
    }

    /// Writes every request param that is set in `params` (`model`,
    /// `temperature`, `response_format`, the loop limits, ...); stops at
    /// the first the node refuses.
    pub fn set(&self, params: &RequestParams) -> Result<(), Error> {
        for (key, value) in params.writes() {
            self.set_param(key, &value)?;
        }
        Ok(())
    }

    /// Offers the model a tool this guest implements: `body` gets the
    /// model's arguments and returns the result text (or an error text the
    /// model sees). It runs while a send is under way, where every cchat
    /// call is refused with [`ErrorKind::Busy`].
    ///
    /// ```no_run
    /// # use spear_guest::{json, Chat};
    /// let chat = Chat::new()?;
    /// chat.tool("double", "Doubles a number.", json!({"type": "object",
    ///     "properties": {"n": {"type": "number"}}, "required": ["n"]}),
    ///     |args| Ok((args["n"].as_f64().unwrap_or(0.0) * 2.0).to_string()))?;
    /// # Ok::<(), spear_guest::Error>(())
    /// ```
    pub fn tool(
        &self,
        name: &str,
        description: &str,
        parameters: Value,
        body: impl FnMut(Value) -> Result<String, String> + 'static,
    ) -> Result<(), Error> {
        let spec = calls::GuestToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters,
        };
        let spec = serde_json::to_string(&spec).map_err(|e| not_json("the tool spec", e))?;
        // SAFETY: the pointer and length describe a live slice.
        let fn_id =
            check(unsafe { raw::cchat_write_fn(self.handle, spec.as_ptr(), spec.len() as u32) })?;
        guest_tools::register(fn_id, Box::new(body));
        self.tools.borrow_mut().push(fn_id);
        Ok(())
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
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("the node sent a value that is not JSON: {e}"),
            )
        })
    }

    /// Limits this session to these MCP servers (a subset of the task's).
    pub fn use_servers(&self, ids: &[&str]) -> Result<(), Error> {
        self.set_param(params::MCP_SERVER_IDS, &json!(ids))
    }

    /// Only tools matching one of these patterns (`*` and `?` globs).
    pub fn allow_tools(&self, patterns: &[&str]) -> Result<(), Error> {
        self.set_param(params::MCP_TOOL_ALLOWLIST, &json!(patterns))
    }

    /// Never these tools, whatever else allows them.
    pub fn deny_tools(&self, patterns: &[&str]) -> Result<(), Error> {
        self.set_param(params::MCP_TOOL_DENYLIST, &json!(patterns))
    }

    /// No MCP tools for this session (the model answers on its own).
    pub fn disable_mcp(&self) -> Result<(), Error> {
        self.set_param(params::MCP_ENABLED, &json!(false))
    }

    /// Applies several MCP params at once; see [`McpParams`].
    pub fn apply(&self, params: &McpParams) -> Result<(), Error> {
        for (key, value) in params.writes() {
            self.set_param(key, &value)?;
        }
        Ok(())
    }

    /// Adds a message: `system` or `user` text (for `assistant` and
    /// `tool`, use [`Chat::write_assistant`] and [`Chat::answer`]).
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

    /// Lets the model answer, running the allowed MCP tools it calls. On
    /// failure the error carries the reply's sentence (which limit, or what
    /// the provider said).
    pub fn send(&self) -> Result<Reply, Error> {
        self.send_with(params::send_flags::AUTO_TOOL_CALLS)
    }

    /// One model request with no tools offered.
    pub fn send_without_tools(&self) -> Result<Reply, Error> {
        self.send_with(params::send_flags::NO_TOOLS)
    }

    /// One model request with the session's tools offered; the node runs
    /// none of the calls the model makes: they are in
    /// [`Reply::tool_calls`], for the guest to run ([`Chat::call_tool`])
    /// or refuse, and to answer each ([`Chat::answer`]) before it sends
    /// again.
    pub fn send_once(&self) -> Result<Reply, Error> {
        self.send_with(0)
    }

    /// [`Chat::send`], then the answer read as `T` (set a
    /// `response_format` first, e.g. [`RequestParams::json_schema`]).
    pub fn send_json<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        let reply = self.send()?;
        let json = match reply.json {
            Some(json) => json,
            None => serde_json::from_str(&reply.content)
                .map_err(|e| not_json("the answer is not JSON", e))?,
        };
        serde_json::from_value(json)
            .map_err(|e| not_json("the answer does not have the type asked for", e))
    }

    /// Runs an MCP tool the model asked for in this session's last request
    /// (same policy re-check, budgets and deadline as the node's own loop).
    /// The result is not written to the history: answer the call with it.
    pub fn call_tool(&self, call: &RequestedCall) -> Result<ToolResult, Error> {
        let call = serde_json::to_string(call).map_err(|e| not_json("the call", e))?;
        let bytes = read_buffer(|out, len| {
            // SAFETY: the call is a live slice; `out` has `*len` writable
            // bytes. A retry after ENOSPC gets the kept result: the tool
            // runs once.
            unsafe { raw::cchat_call_tool(self.handle, call.as_ptr(), call.len() as u32, out, len) }
        })?;
        serde_json::from_slice(&bytes).map_err(|e| not_json("the node's tool result", e))
    }

    /// Answers the tool call `call_id` with `content` (a `tool` message).
    pub fn answer(&self, call_id: &str, content: &str) -> Result<(), Error> {
        let message = calls::ToolMessage {
            tool_call_id: call_id.to_string(),
            content: content.to_string(),
        };
        let text = serde_json::to_string(&message).map_err(|e| not_json("the tool message", e))?;
        self.write("tool", &text)
    }

    /// Writes a model turn of the guest's own making (when it builds the
    /// history itself): text, tool calls, or both.
    pub fn write_assistant(&self, message: &AssistantMessage) -> Result<(), Error> {
        let text =
            serde_json::to_string(message).map_err(|e| not_json("the assistant message", e))?;
        self.write("assistant", &text)
    }

    fn send_with(&self, flags: u32) -> Result<Reply, Error> {
        // SAFETY: no pointers are passed. A failure's sentence (the reply's
        // `error`) is what `cchat_last_error` returns.
        check(unsafe { raw::cchat_send(self.handle, flags) })?;
        let bytes = read_buffer(|out, len| {
            // SAFETY: `out` has `*len` writable bytes; the host writes at most that.
            unsafe { raw::cchat_recv(self.handle, out, len) }
        })?;
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("the node's reply is not a reply: {e}"),
            )
        })
    }
}

impl Drop for Chat {
    fn drop(&mut self) {
        // SAFETY: no pointers are passed.
        unsafe {
            raw::cchat_close(self.handle);
        }
        guest_tools::unregister(&self.tools.borrow());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_wasm_every_call_is_unsupported() {
        let error = Chat::new().err().map(|e| e.kind());
        assert_eq!(error, Some(ErrorKind::Unsupported));
    }

    #[test]
    fn mcp_params_write_only_what_was_set() {
        let wanted = McpParams::new().servers(&["fs"]).deny(&["write_*"]);
        assert_eq!(
            wanted.writes(),
            vec![
                (params::MCP_SERVER_IDS, json!(["fs"])),
                (params::MCP_TOOL_DENYLIST, json!(["write_*"]))
            ]
        );
        assert!(McpParams::new().writes().is_empty());
    }
}
