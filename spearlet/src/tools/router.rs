//! The tool router: builds the tool list offered in one LLM request, and
//! executes the tool calls the model makes against it.
//!
//! Only names offered in that very request are executable, the policy is
//! checked again at execution (the session may have narrowed since), and the
//! outcome is always something a model can read: an error is a result too.

use std::sync::Arc;

use rmcp::model::JsonObject;
use spear_proto::audit::{Kind, Outcome, Record};
use tracing::{info_span, Instrument};

use super::approval::ApprovalNote;
use super::{OfferedTools, ResolveError, ToolRef};
use crate::connections::Connections;
use crate::registry::RegistryHandle;
use crate::tool_index::Terms;
use crate::tool_policy::{server_verdict, tool_verdict, SessionPolicy, TaskPolicy};
use crate::trust::{NodeTrust, RunScope, RunTrust};

/// One tool as offered to the model.
#[derive(Debug, Clone)]
pub struct OfferedTool {
    /// The name the model sees (docs/mcp-on-nodes.md, "Tool names").
    pub name: String,
    /// Names the server and the original tool, so the model can tell tools apart.
    pub description: String,
    pub input_schema: Arc<JsonObject>,
    pub server_id: String,
    pub tool: String,
    /// Its words, for tool search.
    pub terms: Arc<Terms>,
    /// Bytes of its definition as sent to a model.
    pub definition_bytes: usize,
}

/// The tools of one request, and the map to resolve the model's calls.
#[derive(Debug, Default, Clone)]
pub struct ToolSet {
    pub offered: OfferedTools,
    pub tools: Vec<OfferedTool>,
    /// Tools the policy allows but their pin holds back, by the name they
    /// would have: a call to one is answered with why (and the command
    /// that shows the change), not as an unknown tool.
    pub held: std::collections::BTreeMap<String, String>,
}

impl ToolSet {
    /// The name `target` is offered by in this set.
    pub fn name_of(&self, target: &ToolRef) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t.server_id == target.server && t.tool == target.tool)
            .map(|t| t.name.as_str())
    }
}

/// What a tool call gives back to the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutcome {
    pub text: String,
    pub is_error: bool,
    /// The tool that ran, if any did.
    pub executed: Option<ToolRef>,
    /// The approval the call waited for, if it needed one.
    pub approval: Option<ApprovalNote>,
    /// Set when a fleet quota refused the call.
    pub quota: bool,
    /// The server's own result, when it fit the server's output bound
    /// (with the node's secrets still in it: `northbound/result.rs` takes
    /// them out before a client sees it).
    pub upstream: Option<Arc<rmcp::model::CallToolResult>>,
}

impl ToolOutcome {
    pub(super) fn refused(text: String) -> Self {
        Self {
            text,
            is_error: true,
            ..Self::default()
        }
    }
}

/// A call [`Router::check`] lets through: its tool, and the rule that
/// allows it (the one `spearlet explain` names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    pub target: ToolRef,
    pub rule: String,
}

/// Why a call is not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallRefused {
    #[error(transparent)]
    NotOffered(#[from] ResolveError),
    #[error("tool '{tool}' is not allowed now: {rule}")]
    NotAllowed { tool: String, rule: String },
    /// Listed, but not as pinned.
    #[error("{0}")]
    Held(String),
}

/// Builds tool sets and executes calls: the node's, or one run's (with
/// who its calls are for, which approvals and audit records carry).
#[derive(Clone)]
pub struct Router {
    pub(super) connections: Connections,
    pub(super) registry: RegistryHandle,
    pub(super) trust: RunTrust,
}

impl Router {
    pub fn new(connections: Connections, registry: RegistryHandle) -> Self {
        Self {
            connections,
            registry,
            trust: RunTrust::default(),
        }
    }

    /// This router with the node's approvals and audit log.
    pub fn with_trust(mut self, node: NodeTrust) -> Self {
        self.trust.node = node;
        self
    }

    /// The router of one run.
    pub fn for_run(&self, scope: RunScope) -> Router {
        let mut run = self.clone();
        run.trust.scope = Arc::new(scope);
        run.trust.used = Arc::default();
        run.trust.quota_stop = Arc::default();
        run
    }

    /// `text` without the values `server_id`'s env and header references
    /// resolved to, for what leaves the node.
    pub fn redact(&self, server_id: &str, text: &str) -> String {
        self.connections.redact(server_id, text)
    }

    /// The run's trust parts (its audit log, its ids).
    pub fn trust(&self) -> &RunTrust {
        &self.trust
    }

    /// What a session of `task` with `writes` would be offered here, with
    /// this node's registry and live connections: `spearlet explain`'s
    /// answer, for SMS's console.
    pub async fn explain(
        &self,
        task: &TaskPolicy,
        writes: &[(String, serde_json::Value)],
    ) -> super::Explanation {
        let view = self.registry.current();
        super::explain(task, writes, &view, Some(&self.connections)).await
    }

    /// Every tool the policy lets this session offer, from usable servers,
    /// under the names and descriptions a model sees.
    pub async fn tool_set(&self, task: &TaskPolicy, session: &SessionPolicy) -> ToolSet {
        let mut set = ToolSet::default();
        for usable in self.usable(task, session).await {
            let (spec, catalog) = (&usable.spec, &usable.catalog);
            let server_id = spec.id.as_str();
            for (tool, held) in &catalog.held {
                if tool_verdict(task, session, spec, tool).offered {
                    let name = crate::connections::names::offered_name(server_id, tool);
                    set.held.insert(name, held.sentence(server_id, tool));
                }
            }
            for (tool, offer) in catalog.tools.iter().zip(&catalog.offered) {
                let (name, description) = (&offer.name, &offer.description);
                if !tool_verdict(task, session, spec, &tool.name).offered {
                    continue;
                }
                set.offered.offer_named(name.clone(), server_id, &tool.name);
                set.tools.push(OfferedTool {
                    name: name.clone(),
                    description: description.clone(),
                    input_schema: Arc::clone(&tool.input_schema),
                    server_id: server_id.to_string(),
                    tool: tool.name.to_string(),
                    terms: Arc::clone(&offer.terms),
                    definition_bytes: offer.definition_bytes,
                });
            }
        }
        set
    }

    /// The tool `name` stands for, if it was offered in `set` and the
    /// policy still allows it (the session may have narrowed since), with
    /// the rule that allows it.
    pub fn check(
        &self,
        task: &TaskPolicy,
        session: &SessionPolicy,
        set: &ToolSet,
        name: &str,
    ) -> Result<Allowed, CallRefused> {
        let target = match (set.offered.resolve(name), set.held.get(name)) {
            (Ok(target), _) => target.clone(),
            (Err(_), Some(held)) => return Err(CallRefused::Held(held.clone())),
            (Err(unknown), None) => return Err(unknown.into()),
        };
        self.allow(task, session, target)
    }

    /// Whether the policy allows `target` now, with the rule that does:
    /// the check every call passes, whoever named the tool.
    pub fn allow(
        &self,
        task: &TaskPolicy,
        session: &SessionPolicy,
        target: ToolRef,
    ) -> Result<Allowed, CallRefused> {
        let (server_id, tool) = (&target.server, &target.tool);
        let not_allowed = |rule: String| CallRefused::NotAllowed {
            tool: tool.clone(),
            rule,
        };
        let view = self.registry.current();
        let spec = view.servers.get(server_id).and_then(|r| r.spec.as_ref());
        let server = server_verdict(task, session, server_id, spec, Ok(()));
        if !server.offered {
            return Err(not_allowed(server.rule));
        }
        let rule = match spec {
            Some(spec) => {
                let verdict = tool_verdict(task, session, spec, tool);
                if !verdict.offered {
                    return Err(not_allowed(verdict.rule));
                }
                verdict.rule
            }
            None => server.rule,
        };
        Ok(Allowed { target, rule })
    }

    /// Executes one call of the model: `name` as the model sent it and its
    /// `arguments` as the JSON text the model wrote.
    pub async fn execute(
        &self,
        task: &TaskPolicy,
        session: &SessionPolicy,
        set: &ToolSet,
        name: &str,
        arguments: &str,
    ) -> ToolOutcome {
        match self.check(task, session, set, name) {
            Ok(allowed) => self.run(task, allowed, arguments).await,
            Err(refused) => {
                self.audit_refused(set, name, &refused);
                ToolOutcome::refused(refused.to_string())
            }
        }
    }

    /// Records a call [`Router::check`] refused.
    pub fn audit_refused(&self, set: &ToolSet, name: &str, refused: &CallRefused) {
        let target = set.offered.resolve(name).ok();
        let (outcome, rule) = match refused {
            CallRefused::Held(why) => (Outcome::Held, why.clone()),
            other => (Outcome::Denied, other.to_string()),
        };
        self.trust.audit(Record {
            kind: Kind::ToolCall,
            outcome,
            server: target.map(|t| t.server.clone()).unwrap_or_default(),
            tool: target.map_or_else(
                || spear_common::text::prefix(name, 64).to_string(),
                |t| t.tool.clone(),
            ),
            rule,
            ..Record::default()
        });
    }

    /// Runs `target`, which [`Router::check`] allowed, with `arguments` as
    /// the JSON text the model wrote: after a person's approval when its
    /// policy asks for one, and recorded in the audit trail.
    pub async fn run(&self, task: &TaskPolicy, allowed: Allowed, arguments: &str) -> ToolOutcome {
        let Allowed { target, rule } = allowed;
        let mut record = CallRecord::new(&self.trust, self.call_record(&target, arguments));
        record.rule = rule;
        let mut approval = None;
        if let Some(needs) = self.approval_rule(task, &target) {
            record.rule = format!("{}; approval required by {needs}", record.rule);
            match self.approve(&target, arguments, &record).await {
                Ok(note) => {
                    record.approval.clone_from(&note.id);
                    approval = Some(note);
                }
                Err((outcome, note)) => {
                    record.approval.clone_from(&note.id);
                    record.finish(outcome);
                    return ToolOutcome {
                        text: note.sentence(&target),
                        is_error: true,
                        approval: Some(note),
                        ..ToolOutcome::default()
                    };
                }
            }
        }
        if let Err(refused) = self.quota(&target).await {
            record.rule = format!("{}; {refused}", record.rule);
            record.finish(Outcome::Quota);
            return ToolOutcome {
                quota: true,
                approval,
                ..ToolOutcome::refused(refused.to_string())
            };
        }
        let mut outcome = self.call(target, arguments).await;
        record.finish(if outcome.is_error {
            Outcome::Failed
        } else if approval.is_some() {
            Outcome::Approved
        } else {
            Outcome::Run
        });
        outcome.approval = approval;
        outcome
    }

    /// One unit of each fleet quota a call of `target` counts against.
    async fn quota(&self, target: &ToolRef) -> Result<(), crate::quota::QuotaRefused> {
        let view = self.registry.current();
        let quota = view
            .servers
            .get(&target.server)
            .and_then(|r| r.spec.as_ref())
            .and_then(|spec| spec.quota.as_ref());
        self.trust
            .call_quota(&target.server, quota, &target.tool)
            .await
    }

    /// The call, with nothing in its way.
    async fn call(&self, target: ToolRef, arguments: &str) -> ToolOutcome {
        let (server_id, tool) = (&target.server, &target.tool);
        let arguments: Option<JsonObject> = match arguments.trim() {
            "" => None,
            text => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                Ok(_) => {
                    return ToolOutcome::refused("tool arguments must be a JSON object".into())
                }
                Err(e) => {
                    return ToolOutcome::refused(format!("tool arguments are not valid JSON: {e}"))
                }
            },
        };
        let span = info_span!("tool_call", server_id = %server_id, tool = %tool);
        let on_behalf = self.trust.scope.on_behalf.as_ref();
        let result = self
            .connections
            .call_for(server_id, tool, arguments, on_behalf)
            .instrument(span)
            .await;
        match result {
            Ok(rendered) => ToolOutcome {
                // The credentials the server was handed stay out of what
                // the model reads.
                text: self.connections.redact_result(server_id, rendered.text),
                is_error: rendered.is_error,
                executed: Some(target),
                upstream: rendered.upstream,
                ..ToolOutcome::default()
            },
            Err(error) => ToolOutcome {
                text: format!("tool '{tool}' of server '{server_id}' failed: {error}"),
                is_error: true,
                executed: Some(target),
                ..ToolOutcome::default()
            },
        }
    }
}

/// A call's audit record while the call is under way: appended with its
/// outcome by [`CallRecord::finish`], or, when the call's future is
/// dropped first (the run's deadline cut it, or the run was stopped), as
/// `failed` with why: no decision goes unrecorded.
struct CallRecord<'r> {
    trust: &'r RunTrust,
    record: Record,
    started: std::time::Instant,
    done: bool,
}

impl<'r> CallRecord<'r> {
    fn new(trust: &'r RunTrust, record: Record) -> Self {
        Self {
            trust,
            record,
            started: std::time::Instant::now(),
            done: false,
        }
    }

    fn finish(mut self, outcome: Outcome) {
        self.append(outcome);
    }

    fn append(&mut self, outcome: Outcome) {
        self.done = true;
        let mut record = std::mem::take(&mut self.record);
        record.outcome = outcome;
        record.duration_us = Some(self.started.elapsed().as_micros() as u64);
        self.trust.audit(record);
    }
}

impl std::ops::Deref for CallRecord<'_> {
    type Target = Record;
    fn deref(&self) -> &Record {
        &self.record
    }
}

impl std::ops::DerefMut for CallRecord<'_> {
    fn deref_mut(&mut self) -> &mut Record {
        &mut self.record
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record.rule = format!(
                "{}; cut short before it ended (the run's deadline, or the run was stopped)",
                self.record.rule
            );
            self.append(Outcome::Failed);
        }
    }
}
