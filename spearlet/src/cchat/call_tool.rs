//! `cchat_call_tool`: a guest-driven tool call. After a send without
//! automatic tool calls, the guest runs an MCP tool the model asked for
//! (or any other tool offered in that session's last request) itself,
//! with the same resolution, policy re-check, budgets and deadline as the
//! loop, then answers the call with a `tool` message. A call of the
//! node's search tool is answered by the node, as in the loop.

use std::time::Instant;

use spear_guest::calls::{ApprovalReply, RequestedCall, ToolResult};
use spear_guest::errno::{EACCES, EAGAIN, EINVAL, ENOENT, ETIMEDOUT};

use super::send::TRACE_COST;
use super::sessions::{CallError, Sessions};
use super::CallTrace;
use crate::tools::{Allowed, CallRefused, ToolOutcome, SEARCH_TOOL};

impl Sessions {
    /// Runs `call` (the JSON of a [`RequestedCall`]) and returns the JSON
    /// of its [`ToolResult`]. A result kept after a short buffer (see
    /// [`Sessions::keep_result`]) is handed back without running again.
    pub async fn call_tool(&mut self, handle: i32, call: &[u8]) -> Result<Vec<u8>, CallError> {
        self.not_in_callback("cchat_call_tool")?;
        let session = self
            .sessions
            .get_mut(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        if let Some((kept_call, result)) = session.kept_result.take() {
            let bytes = kept_call.len() + result.len();
            session.charged = session.charged.saturating_sub(bytes);
            self.deps.budget.release_memory(bytes);
            if kept_call == call {
                return Ok(result);
            }
        }
        let call: RequestedCall = serde_json::from_slice(call).map_err(|e| {
            CallError::refused(EINVAL, format!("the call is the JSON {{\"id\", \"name\", \"arguments\"}} of a reply's tool call: {e}"))
        })?;
        if call.name == SEARCH_TOOL && session.search.is_some() {
            return self.search(handle, call);
        }
        let allowed = self.check_call(handle, &call.name)?;
        let target = allowed.target.clone();
        let Some(left) = self.deps.deadline.checked_duration_since(Instant::now()) else {
            return Err(CallError::refused(
                ETIMEDOUT,
                "the run's deadline (limits.wall_ms) passed; finish with what you have",
            ));
        };
        if self.deps.budget.take_tool_calls(1) == 0 {
            let spent = self.deps.budget.tool_calls_spent();
            return Err(self.refuse(spent));
        }
        let started = Instant::now();
        let run = self
            .deps
            .router
            .run(&self.deps.task, allowed, &call.arguments);
        let executed = tokio::time::timeout(left, run).await;
        let outcome = executed.unwrap_or_else(|_| ToolOutcome {
            text: "the tool call was cut short by the run's deadline (limits.wall_ms)".into(),
            is_error: true,
            executed: Some(target.clone()),
            ..ToolOutcome::default()
        });
        self.deps.budget.keep_memory(TRACE_COST);
        self.trace.push(CallTrace {
            tool_call_id: call.id,
            name: call.name,
            refused: CallTrace::refusal(
                outcome.executed.as_ref(),
                None,
                outcome.is_error,
                &outcome.text,
            ),
            executed: outcome.executed,
            guest_tool: None,
            is_error: outcome.is_error,
            duration: started.elapsed(),
            bytes: outcome.text.len(),
            search: None,
        });
        if outcome.quota {
            // A fleet quota is spent: the guest learns when it refills.
            return Err(CallError::refused(EAGAIN, outcome.text));
        }
        let result = ToolResult {
            content: outcome.text,
            is_error: outcome.is_error,
            server: Some(target.server),
            tool: Some(target.tool),
            approval: outcome.approval.map(|a| ApprovalReply {
                id: a.id,
                state: a.state.to_string(),
                reason: a.reason,
            }),
        };
        // Strings and booleans always serialize.
        Ok(serde_json::to_vec(&result).unwrap_or_default())
    }

    /// A guest-driven call of the search tool: counted like any call; the
    /// tools found are the session's to call from its next send.
    fn search(&mut self, handle: i32, call: RequestedCall) -> Result<Vec<u8>, CallError> {
        if self.deps.budget.take_tool_calls(1) == 0 {
            let spent = self.deps.budget.tool_calls_spent();
            return Err(self.refuse(spent));
        }
        let started = Instant::now();
        let session = self.session(handle)?;
        let Some(search) = session.search.as_mut() else {
            return Err(CallError::bad_handle(handle));
        };
        // What it finds is offered from the next send on, as in the loop:
        // a call the model wrote before it saw this answer (in the same
        // reply) is still refused.
        let searched = search.run(&call.arguments);
        self.deps.budget.keep_memory(TRACE_COST);
        self.trace.push(CallTrace {
            tool_call_id: call.id,
            name: call.name,
            executed: None,
            guest_tool: None,
            is_error: searched.is_error,
            duration: started.elapsed(),
            bytes: searched.text.len(),
            search: searched.trace,
            refused: None,
        });
        let result = ToolResult {
            content: searched.text,
            is_error: searched.is_error,
            ..ToolResult::default()
        };
        Ok(serde_json::to_vec(&result).unwrap_or_default())
    }

    /// The MCP tool `name` stands for, if the session's last request
    /// offered it and its policy still allows it; the refusal's errno
    /// otherwise.
    fn check_call(&self, handle: i32, name: &str) -> Result<Allowed, CallError> {
        let session = self
            .sessions
            .get(&handle)
            .ok_or_else(|| CallError::bad_handle(handle))?;
        if session.guest_tools.find(name).is_some() {
            return Err(CallError::refused(
                EINVAL,
                format!("'{name}' is one of this session's guest tools; call your own function directly"),
            ));
        }
        let deps = &self.deps;
        deps.router
            .check(&deps.task, &session.policy, &session.offered, name)
            .inspect_err(|refused| deps.router.audit_refused(&session.offered, name, refused))
            .map_err(|refused| match refused {
                CallRefused::NotOffered(_) => CallError::refused(
                    ENOENT,
                    format!(
                        "tool '{}' was not offered in this session's last request; only those can be called",
                        spear_common::text::prefix(name, 64)
                    ),
                ),
                other => CallError::refused(EACCES, other.to_string()),
            })
    }

    /// Keeps a result the guest's buffer was too small for, so the retry
    /// with the size it was told gets it without running the tool again.
    pub fn keep_result(&mut self, handle: i32, call: Vec<u8>, result: Vec<u8>) {
        if let Some(session) = self.sessions.get_mut(&handle) {
            // Bounded (a call is at most 1 MiB, a result by the server's
            // cap), so kept without a check and given back when taken.
            let bytes = call.len() + result.len();
            self.deps.budget.keep_memory(bytes);
            session.charged += bytes;
            session.kept_result = Some((call, result));
        }
    }
}
