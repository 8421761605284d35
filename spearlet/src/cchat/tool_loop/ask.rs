//! The `Ask` branch: one model request with the history as it stands, and
//! what its answer leads to. Before asking: the send's iteration limit, the
//! deadline and the run's request budget. After: the answer is counted,
//! kept in the history when it fits the run's memory budget, and becomes
//! the final text, the guest's pending calls (`Once`), or calls to run.
//! Searches the provider ran on its side (native tool search) are counted
//! as tool calls first, and what they found is obtained.

use spear_proto::audit::{Kind, Outcome, Record};
use tokio::time::Instant;
use tracing::Instrument;

use std::time::Duration;

use spear_guest::reply::{FoundTool, SearchTrace};

use super::{CallTrace, LoopError, SendMode, SendSetup, Step, ToolLoop};
use crate::llm::{ChatRequest, ProviderSearch, Reply, StopReason};

impl ToolLoop<'_, '_> {
    /// Asks the model once; see the module docs.
    pub(super) async fn ask(&mut self) -> Step {
        if self.outcome.iterations >= self.max_iterations {
            return Step::Done(Err(LoopError::MaxIterations(self.max_iterations)));
        }
        let deadline = Instant::from_std(self.setup.limits.deadline);
        if Instant::now() >= deadline {
            return Step::Done(Err(LoopError::Deadline));
        }
        if let Err(spent) = self.budget.take_request() {
            return Step::Done(Err(spent.into()));
        }
        if let Err(refused) = model_quota(self.setup).await {
            return Step::Done(Err(LoopError::Quota(Box::new(refused))));
        }
        let params = if self.outcome.iterations == 0 {
            &self.first
        } else {
            &self.later
        };
        self.outcome.iterations += 1;
        // No result reaches the model before its audit record is on disk
        // (docs/decisions/0005-audit-chain.md): one wait per request, for every call before it.
        let trust = self.setup.router.trust();
        match tokio::time::timeout_at(deadline, trust.durable()).await {
            Ok(Ok(())) => {}
            Ok(Err(unwritable)) => return Step::Done(Err(unwritable.into())),
            Err(_) => return Step::Done(Err(LoopError::Deadline)),
        }
        let request = ChatRequest {
            messages: self.messages,
            tools: &self.tools,
            params,
        };
        let backend = self.setup.backend;
        // OpenTelemetry GenAI conventions: `chat {model}`, a client span.
        let model = backend.model();
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {model}"),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = backend.provider(),
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            spear.cost_usd = tracing::field::Empty,
        );
        let asked = Instant::now();
        let answered = tokio::time::timeout_at(deadline, backend.complete(request))
            .instrument(span.clone())
            .await;
        self.outcome.model_latency.push(asked.elapsed());
        let usage = answered
            .as_ref()
            .ok()
            .and_then(|r| r.as_ref().ok())
            .map(|r| r.usage);
        let cost = usage.and_then(|u| {
            self.setup
                .prices
                .cost(model, u.prompt_tokens, u.completion_tokens)
        });
        if let Some(cost) = cost {
            span.record("spear.cost_usd", crate::llm::usd(cost));
        }
        if let Some(usage) = usage {
            let tokens = usage.prompt_tokens + usage.completion_tokens;
            trust.model_spent(tokens, cost).await;
        }
        trust.audit(Record {
            kind: Kind::ModelRequest,
            outcome: match &answered {
                Ok(Ok(_)) => Outcome::Answered,
                _ => Outcome::Failed,
            },
            backend: backend.provider().to_string(),
            model: model.to_string(),
            input_tokens: usage.map(|u| u.prompt_tokens),
            output_tokens: usage.map(|u| u.completion_tokens),
            cost_nano_usd: cost,
            duration_us: Some(asked.elapsed().as_micros() as u64),
            ..Record::default()
        });
        match answered {
            Err(_) => Step::Done(Err(LoopError::Deadline)),
            Ok(Err(error)) => Step::Done(Err(LoopError::Llm(error))),
            Ok(Ok(reply)) => {
                span.record("gen_ai.usage.input_tokens", reply.usage.prompt_tokens);
                span.record("gen_ai.usage.output_tokens", reply.usage.completion_tokens);
                self.answered(reply)
            }
        }
    }

    /// Counts and keeps the model's answer; says what comes next.
    fn answered(&mut self, reply: Reply) -> Step {
        self.outcome.usage += reply.usage;
        self.outcome.stop = reply.stop;
        self.budget
            .add_tokens(reply.usage.prompt_tokens + reply.usage.completion_tokens);
        if reply.stop == StopReason::MaxTokens && !reply.message.tool_calls.is_empty() {
            return Step::Done(Err(LoopError::CutToolCall));
        }
        if let Err(limit) = self.provider_searches(&reply.searches) {
            return Step::Done(Err(limit));
        }
        // Not kept when it does not fit: the history stays valid without it.
        if let Err(full) = self.budget.charge_memory(reply.message.footprint()) {
            return Step::Done(Err(full.into()));
        }
        let calls = reply.message.tool_calls.clone();
        let text = reply.message.content.clone().unwrap_or_default();
        self.messages.push(reply.message);
        if calls.is_empty() {
            return Step::Done(Ok(text));
        }
        if self.setup.mode != SendMode::Auto {
            self.outcome.pending = calls;
            return Step::Done(Ok(text));
        }
        Step::RunCalls(calls)
    }

    /// The searches the provider ran before answering: each counted like a
    /// tool call (the run's budget, the send's `max_total_tool_calls`) and
    /// traced, and the tools it referenced obtained, so the answer's calls
    /// of them run. Past a limit the answer is not kept and the send ends.
    /// (Only a backend searching natively is sent deferred tools; any other
    /// provider's searches obtain nothing.)
    fn provider_searches(&mut self, searches: &[ProviderSearch]) -> Result<(), LoopError> {
        let Some(search) = self.search.as_mut().filter(|_| self.native) else {
            return Ok(());
        };
        let limit = self.setup.limits.max_total_tool_calls;
        for provider in searches {
            if self.calls_made >= limit {
                return Err(LoopError::MaxToolCalls(limit));
            }
            if self.budget.take_tool_calls(1) == 0 {
                return Err(LoopError::Budget(self.budget.tool_calls_spent()));
            }
            self.calls_made += 1;
            let mut found = Vec::new();
            for name in &provider.found {
                let target = search.all().offered.resolve(name).ok().cloned();
                if let Some(target) = target.filter(|_| search.load(name)) {
                    found.push(FoundTool {
                        name: name.clone(),
                        server: target.server,
                        tool: target.tool,
                    });
                }
            }
            self.outcome.trace.push(CallTrace {
                tool_call_id: provider.id.clone(),
                name: provider.tool.clone(),
                executed: None,
                guest_tool: None,
                is_error: false,
                duration: Duration::ZERO,
                bytes: 0,
                search: Some(SearchTrace {
                    query: spear_common::text::prefix(&provider.query, 256).to_string(),
                    found,
                }),
                refused: None,
            });
        }
        if !searches.is_empty() {
            self.offer_found();
        }
        Ok(())
    }
}

/// Whether the run's fleet quotas let one more model request be made;
/// a refusal is recorded, and the run is marked as ended by a quota.
async fn model_quota(setup: &SendSetup<'_>) -> Result<(), crate::trust::ModelQuotaRefused> {
    let backend = setup.backend;
    let model = backend.model();
    let priced = setup.prices.cost(model, 0, 0).is_some();
    let trust = setup.router.trust();
    let refused = trust.model_quota(model, priced).await.err();
    let Some(refused) = refused else {
        return Ok(());
    };
    trust.stopped_by_quota();
    trust.audit(Record {
        kind: Kind::ModelRequest,
        outcome: Outcome::Quota,
        backend: backend.provider().to_string(),
        model: model.to_string(),
        rule: refused.to_string(),
        ..Record::default()
    });
    Err(refused)
}
