//! The tool calls of one model answer, run for the automatic loop
//! ([`super::run_send`]): as many as the run's and the send's budgets
//! allow, MCP calls concurrently (the router re-checks policy and each
//! server's limits), guest tools one at a time through the guest's
//! dispatcher; every call is answered with one `tool` message, the refused
//! ones too, so the history stays valid for the provider.

use std::time::{Duration, Instant};

use super::budget::RunBudget;
use super::guest_tools::{GuestCallbacks, MAX_RESULT_BYTES};
use super::tool_loop::{CallTrace, LoopError, SendSetup};
use crate::llm::{ChatMessage, ToolCall};
use crate::tools::{ToolRef, ToolSet};

/// Runs the calls of one answer that both budgets allow (MCP calls
/// concurrently, then guest tools in order) and answers every call, the
/// refused ones too. Returns how many ran.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_calls(
    setup: &SendSetup<'_>,
    set: &ToolSet,
    calls: &[ToolCall],
    per_send: u32,
    messages: &mut Vec<ChatMessage>,
    budget: &mut RunBudget,
    guest: &mut dyn GuestCallbacks,
    trace: &mut Vec<CallTrace>,
) -> Result<u32, LoopError> {
    let wanted = calls.len().min(per_send as usize);
    let allowed = budget.take_tool_calls(wanted);
    let (run, refused) = calls.split_at(allowed);
    let refusal = if allowed < wanted {
        LoopError::Budget(budget.tool_calls_spent())
    } else {
        LoopError::MaxToolCalls(setup.limits.max_total_tool_calls)
    };
    let deadline = setup.limits.deadline;
    let is_guest = |call: &ToolCall| setup.guest_tools.find(&call.name).is_some();
    // MCP calls at once.
    let mcp =
        futures::future::join_all(run.iter().filter(|c| !is_guest(c)).map(|call| async move {
            let started = Instant::now();
            let left = deadline.saturating_duration_since(started);
            let executed = tokio::time::timeout(
                left,
                setup
                    .router
                    .execute(setup.task, setup.policy, set, &call.name, &call.arguments),
            )
            .await;
            let answer = match executed {
                Ok(o) => Answer {
                    text: o.text,
                    is_error: o.is_error,
                    executed: o.executed,
                    guest_tool: None,
                },
                Err(_) => {
                    Answer::error("the tool call was cut short by the session deadline".into())
                }
            };
            (call.id.clone(), started.elapsed(), answer)
        }))
        .await;
    let mut mcp = mcp.into_iter();
    let mut out_of_memory = None;
    for call in run {
        let (duration, answer) = match setup.guest_tools.find(&call.name) {
            Some(tool) => {
                let started = Instant::now();
                let result = guest.call(tool, &call.arguments).await?;
                let answer = if result.text.len() > MAX_RESULT_BYTES {
                    Answer::error(format!(
                        "guest tool '{}' returned {} bytes, over the {MAX_RESULT_BYTES} a tool result may be",
                        call.name,
                        result.text.len()
                    ))
                } else {
                    Answer {
                        text: result.text,
                        is_error: result.is_error,
                        executed: None,
                        guest_tool: Some(call.name.clone()),
                    }
                };
                (started.elapsed(), answer)
            }
            None => match mcp.next() {
                Some((_, duration, answer)) => (duration, answer),
                None => (
                    Duration::ZERO,
                    Answer::error("the tool call was lost".into()),
                ),
            },
        };
        let Answer {
            mut text,
            mut is_error,
            executed,
            guest_tool,
        } = answer;
        let message = ChatMessage::tool(&call.id, String::new());
        if let Err(full) = budget.charge_memory(message.footprint() + text.len()) {
            // The call is still answered (a short note, charged past the
            // budget: its size is bounded), and the loop ends.
            text = format!("result not kept: {full}");
            is_error = true;
            out_of_memory = Some(full);
        }
        trace.push(CallTrace {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            executed,
            guest_tool,
            is_error,
            duration,
            bytes: text.len(),
        });
        messages.push(ChatMessage::tool(&call.id, text));
    }
    for call in refused {
        let text = format!("not executed: {refusal}");
        trace.push(CallTrace {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            executed: None,
            guest_tool: None,
            is_error: true,
            duration: Duration::ZERO,
            bytes: text.len(),
        });
        messages.push(ChatMessage::tool(&call.id, text));
    }
    if let Some(full) = out_of_memory {
        return Err(full.into());
    }
    if !refused.is_empty() {
        return Err(refusal);
    }
    Ok(run.len() as u32)
}

/// One call's answer before it is kept.
struct Answer {
    text: String,
    is_error: bool,
    executed: Option<ToolRef>,
    guest_tool: Option<String>,
}

impl Answer {
    fn error(text: String) -> Answer {
        Answer {
            text,
            is_error: true,
            executed: None,
            guest_tool: None,
        }
    }
}
