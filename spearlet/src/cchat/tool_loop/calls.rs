//! The `RunCalls` branch: the tool calls of one answer, as many as the
//! run's and the send's budgets allow, MCP calls concurrently (the router
//! re-checks policy and each server's limits), guest tools one at a time
//! through the guest's dispatcher, searches of the session's tools by the
//! node (the tools found are offered from the next request on). Every
//! call is answered with one `tool`
//! message, the refused ones too, so the history stays valid for the
//! provider; then the loop asks again, or ends on what refused a call.

use std::time::Duration;

use spear_proto::audit::{Kind, Outcome, Record};
use tokio::time::Instant;

use super::{CallTrace, LoopError, SendSetup, Step, ToolLoop};
use crate::cchat::guest_tools::{GuestTool, MAX_RESULT_BYTES};
use crate::llm::{ChatMessage, ToolCall};
use crate::tools::{ToolRef, ToolSet, SEARCH_TOOL};
use spear_guest::reply::SearchTrace;

/// One call's answer before it is kept.
struct Answer {
    text: String,
    is_error: bool,
    executed: Option<ToolRef>,
    guest_tool: Option<String>,
    duration: Duration,
    search: Option<SearchTrace>,
}

impl Answer {
    fn error(text: String) -> Answer {
        Answer {
            text,
            is_error: true,
            executed: None,
            guest_tool: None,
            duration: Duration::ZERO,
            search: None,
        }
    }
}

impl ToolLoop<'_, '_> {
    /// Runs and answers `calls`; see the module docs.
    pub(super) async fn run_calls(&mut self, calls: Vec<ToolCall>) -> Step {
        let limit = self.setup.limits.max_total_tool_calls;
        let wanted = calls
            .len()
            .min(limit.saturating_sub(self.calls_made) as usize);
        let allowed = self.budget.take_tool_calls(wanted);
        let (run, refused) = calls.split_at(allowed);
        let refusal = if allowed < wanted {
            LoopError::Budget(self.budget.tool_calls_spent())
        } else {
            LoopError::MaxToolCalls(limit)
        };
        // The node's search tool is offered only when the node searches.
        let searching = self.search.is_some() && !self.native;
        let mut mcp = run_mcp(self.setup, &self.set, run, searching)
            .await
            .into_iter();
        let mut out_of_memory = None;
        for call in run {
            let answer = match self.setup.guest_tools.find(&call.name) {
                Some(tool) => match self.run_guest(call, tool).await {
                    Ok(answer) => answer,
                    Err(stopped) => return Step::Done(Err(stopped)),
                },
                None if searching && call.name == SEARCH_TOOL => self.run_search(call),
                None => mcp
                    .next()
                    .unwrap_or_else(|| Answer::error("the tool call was lost".into())),
            };
            if let Err(full) = self.keep(call, answer) {
                out_of_memory = Some(full);
            }
        }
        for call in refused {
            let target = self.set.offered.resolve(&call.name).ok();
            self.setup.router.trust().audit(Record {
                kind: Kind::ToolCall,
                outcome: Outcome::Budget,
                server: target.map(|t| t.server.clone()).unwrap_or_default(),
                tool: target.map_or_else(
                    || spear_common::text::prefix(&call.name, 64).to_string(),
                    |t| t.tool.clone(),
                ),
                rule: refusal.to_string(),
                tool_calls_used: Some(u64::from(self.calls_made) + run.len() as u64),
                ..Record::default()
            });
            // A short note, not charged: its size is bounded.
            self.answer(call, Answer::error(format!("not executed: {refusal}")));
        }
        self.calls_made += run.len() as u32;
        self.offer_found();
        match (out_of_memory, refused.is_empty()) {
            (Some(full), _) => Step::Done(Err(full)),
            (None, false) => Step::Done(Err(refusal)),
            (None, true) => Step::Ask,
        }
    }

    /// A guest tool's call through the guest's dispatcher; the run is over
    /// when the guest broke it.
    async fn run_guest(&mut self, call: &ToolCall, tool: &GuestTool) -> Result<Answer, LoopError> {
        let started = Instant::now();
        let result = self.guest.call(tool, &call.arguments).await?;
        let duration = started.elapsed();
        if result.text.len() > MAX_RESULT_BYTES {
            return Ok(Answer {
                duration,
                ..Answer::error(format!(
                    "guest tool '{}' returned {} bytes, over the {MAX_RESULT_BYTES} a tool result may be",
                    call.name,
                    result.text.len()
                ))
            });
        }
        Ok(Answer {
            text: result.text,
            is_error: result.is_error,
            executed: None,
            guest_tool: Some(call.name.clone()),
            duration,
            search: None,
        })
    }

    /// A search of the session's tools, answered by the node.
    fn run_search(&mut self, call: &ToolCall) -> Answer {
        let started = Instant::now();
        let Some(search) = self.search.as_mut() else {
            return Answer::error("the tool call was lost".into());
        };
        let searched = search.run(&call.arguments);
        Answer {
            text: searched.text,
            is_error: searched.is_error,
            duration: started.elapsed(),
            search: searched.trace,
            ..Answer::error(String::new())
        }
    }

    /// Charges `answer` to the run's memory budget and answers `call`
    /// with it. A result the budget cannot hold is answered with a short
    /// note instead (charged past the budget: its size is bounded), and
    /// the loop ends.
    fn keep(&mut self, call: &ToolCall, mut answer: Answer) -> Result<(), LoopError> {
        let message = ChatMessage::tool(&call.id, String::new());
        let charged = self
            .budget
            .charge_memory(message.footprint() + answer.text.len());
        if let Err(full) = &charged {
            answer.text = format!("result not kept: {full}");
            answer.is_error = true;
        }
        self.answer(call, answer);
        charged.map_err(LoopError::from)
    }

    /// Answers `call` in the history and the trace.
    fn answer(&mut self, call: &ToolCall, answer: Answer) {
        let refused = CallTrace::refusal(
            answer.executed.as_ref(),
            answer.guest_tool.as_ref(),
            answer.is_error && answer.search.is_none(),
            &answer.text,
        );
        self.outcome.trace.push(CallTrace {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            executed: answer.executed,
            guest_tool: answer.guest_tool,
            is_error: answer.is_error,
            duration: answer.duration,
            bytes: answer.text.len(),
            search: answer.search,
            refused,
        });
        self.messages.push(ChatMessage::tool(&call.id, answer.text));
    }
}

/// The MCP calls among `run` (not the guest's tools, nor searches when
/// `searching`), at once, each cut at the deadline; in the order of `run`.
/// (A function of the setup alone: the guest's callbacks, which are not
/// `Sync`, stay out of the futures.)
async fn run_mcp(
    setup: &SendSetup<'_>,
    set: &ToolSet,
    run: &[ToolCall],
    searching: bool,
) -> Vec<Answer> {
    let deadline = Instant::from_std(setup.limits.deadline);
    let mcp = run.iter().filter(|call| {
        setup.guest_tools.find(&call.name).is_none() && !(searching && call.name == SEARCH_TOOL)
    });
    futures::future::join_all(mcp.map(|call| async move {
        let started = Instant::now();
        let executed = tokio::time::timeout_at(
            deadline,
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
                duration: Duration::ZERO,
                search: None,
            },
            Err(_) => Answer::error("the tool call was cut short by the session deadline".into()),
        };
        Answer {
            duration: started.elapsed(),
            ..answer
        }
    }))
    .await
}
