//! What a session's history must look like before it is sent, so a
//! guest that builds history itself (guest-driven tool calls, its own
//! `assistant` and `tool` messages) gets the host's sentence instead of the
//! provider's 400: every tool call of an assistant message is answered by a
//! `tool` message before anything else is written or sent; a `tool`
//! message answers an open call; the conversation starts with a user
//! message (after any system messages).

use std::collections::BTreeSet;

use spear_guest::calls::AssistantMessage;

use crate::llm::{ChatMessage, Role};

/// A history the providers would refuse, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error("tool calls {0} are not answered yet; write a tool message for each (role tool, with its tool_call_id) first")]
    OpenCalls(String),
    #[error("tool_call_id '{id}' answers no open tool call of this session (open: {open})")]
    NotOpen { id: String, open: String },
    #[error("the session has no user message to send; write one first")]
    NoUser,
    #[error("the first message after the system messages must be a user message, not {0}")]
    FirstNotUser(&'static str),
    #[error("the assistant message is not valid: {0}")]
    BadAssistant(String),
}

/// Ids asked by the last assistant message and not answered yet.
pub fn open_calls(messages: &[ChatMessage]) -> BTreeSet<&str> {
    let Some(at) = messages.iter().rposition(|m| m.role == Role::Assistant) else {
        return BTreeSet::new();
    };
    let mut open: BTreeSet<&str> = messages[at]
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    for answer in &messages[at + 1..] {
        if let Some(id) = answer.tool_call_id.as_deref() {
            open.remove(id);
        }
    }
    open
}

fn joined(ids: &BTreeSet<&str>) -> String {
    ids.iter().copied().collect::<Vec<_>>().join(", ")
}

/// Before a `system`, `user` or `assistant` message is written.
pub fn check_no_open_calls(messages: &[ChatMessage]) -> Result<(), HistoryError> {
    let open = open_calls(messages);
    if open.is_empty() {
        Ok(())
    } else {
        Err(HistoryError::OpenCalls(joined(&open)))
    }
}

/// Before a `tool` message answering `id` is written.
pub fn check_answer(messages: &[ChatMessage], id: &str) -> Result<(), HistoryError> {
    let open = open_calls(messages);
    if open.contains(id) {
        Ok(())
    } else {
        let open = if open.is_empty() {
            "none".to_string()
        } else {
            joined(&open)
        };
        Err(HistoryError::NotOpen {
            id: spear_common::text::prefix(id, 128).to_string(),
            open,
        })
    }
}

/// An `assistant` message the guest wrote, checked and converted.
pub fn assistant(message: AssistantMessage) -> Result<ChatMessage, HistoryError> {
    let bad = |why: &str| Err(HistoryError::BadAssistant(why.to_string()));
    let content = message.content.filter(|c| !c.is_empty());
    if content.is_none() && message.tool_calls.is_empty() {
        return bad("it needs content or tool_calls");
    }
    let mut ids = BTreeSet::new();
    for call in &message.tool_calls {
        if call.id.is_empty() || call.id.len() > 128 || !ids.insert(call.id.as_str()) {
            return bad("each tool call needs its own id of 1 to 128 bytes");
        }
        if !crate::tools::valid_name(&call.name) {
            return bad("tool call names must match ^[A-Za-z0-9_-]{1,64}$");
        }
        if !serde_json::from_str::<serde_json::Value>(&call.arguments).is_ok_and(|v| v.is_object())
        {
            return bad("tool call arguments must be the JSON text of an object");
        }
    }
    let calls = message
        .tool_calls
        .into_iter()
        .map(|c| crate::llm::ToolCall {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        })
        .collect();
    Ok(ChatMessage::assistant(content.unwrap_or_default(), calls))
}

/// Before a send: every call answered, and a user message first.
pub fn check_before_send(messages: &[ChatMessage]) -> Result<(), HistoryError> {
    check_no_open_calls(messages)?;
    match messages
        .iter()
        .find(|m| m.role != Role::System)
        .map(|m| m.role)
    {
        None => Err(HistoryError::NoUser),
        Some(Role::User) => Ok(()),
        Some(Role::Assistant) => Err(HistoryError::FirstNotUser("an assistant message")),
        Some(_) => Err(HistoryError::FirstNotUser("a tool message")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn every_call_is_answered_before_anything_else() {
        let mut history = vec![
            ChatMessage::user("hi"),
            ChatMessage::assistant(String::new(), vec![call("a"), call("b")]),
        ];
        assert_eq!(check_answer(&history, "a"), Ok(()));
        let made_up = check_answer(&history, "zzz").unwrap_err().to_string();
        assert!(
            made_up.contains("'zzz'") && made_up.contains("a, b"),
            "{made_up}"
        );
        history.push(ChatMessage::tool("a", "ok".into()));
        let error = check_before_send(&history).unwrap_err().to_string();
        assert!(error.contains("b are not answered"), "{error}");
        assert!(check_answer(&history, "a").is_err(), "answered once");
        history.push(ChatMessage::tool("b", "ok".into()));
        assert_eq!(check_before_send(&history), Ok(()));
        assert_eq!(
            check_before_send(&[ChatMessage::system("s")]),
            Err(HistoryError::NoUser)
        );
    }
}
