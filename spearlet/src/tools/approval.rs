//! A call that needs a person's approval (docs/trust.md): the router asks
//! SMS with the call's binding, records that the call waits, waits (wall
//! time only: the run's deadline still cuts it), and on approval claims
//! it with the binding as it is now, so a tool whose definition changed
//! during the wait is refused. Deny, expiry and a refused claim are tool
//! results the model reads; the history stays valid.

use std::time::{Duration, Instant};

use spear_proto::approvals::{arguments_digest, DEFAULT_EXPIRY};
use spear_proto::audit::{Kind, Outcome, Record};
use spear_proto::v1::{ApprovalBinding, ApprovalState};

use super::{Router, ToolRef};
use crate::tool_policy::{approval_rule, TaskPolicy};

/// What happened to a call's approval, for the model and for a guest
/// that drives its calls itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApprovalNote {
    /// Empty when none could be asked for.
    pub id: String,
    /// `approved`, `denied`, `expired`, `refused` (the claim was) or
    /// `unavailable` (SMS could not be asked).
    pub state: &'static str,
    /// The admin's reason, or why it was refused.
    pub reason: String,
}

impl ApprovalNote {
    fn new(id: &str, state: &'static str, reason: impl Into<String>) -> Self {
        Self {
            id: id.to_string(),
            state,
            reason: reason.into(),
        }
    }

    /// What the model is told when the call did not run.
    pub fn sentence(&self, target: &ToolRef) -> String {
        let call = format!(
            "this call of tool '{}' of server '{}'",
            target.tool, target.server
        );
        let reason = match self.reason.as_str() {
            "" => String::new(),
            reason => format!(": {reason}"),
        };
        match self.state {
            "denied" => format!("a person denied {call} (approval {}){reason}; it was not run, do not retry it", self.id),
            "expired" => format!("nobody approved {call} in time (approval {}); it was not run", self.id),
            "refused" => format!("the approval of {call} could not be used{reason}; it was not run"),
            _ => format!("{call} needs a person's approval and none could be asked for{reason}; it was not run"),
        }
    }
}

impl Router {
    /// The rule that makes `target`'s calls wait for approval, if one does.
    pub(super) fn approval_rule(&self, task: &TaskPolicy, target: &ToolRef) -> Option<String> {
        let view = self.registry.current();
        let spec = view
            .servers
            .get(&target.server)
            .and_then(|r| r.spec.as_ref());
        approval_rule(task, spec, &target.tool)
    }

    /// The audit record of a call of `target`, before its outcome: the
    /// policy revision, the tool's pin and the arguments' digest (one
    /// look at the registry, no lock). Nothing is computed when the node
    /// keeps no audit log.
    pub(super) fn call_record(&self, target: &ToolRef, arguments: &str) -> Record {
        let mut record = Record {
            kind: Kind::ToolCall,
            server: target.server.clone(),
            tool: target.tool.clone(),
            ..Record::default()
        };
        if self.trust.node.audit.is_none() {
            return record;
        }
        let view = self.registry.current();
        if let Some(server) = view.servers.get(&target.server) {
            record.policy_revision = Some(server.mod_revision);
            if let Some(pin) = server.pins.as_ref().and_then(|p| p.tools.get(&target.tool)) {
                record.pin.clone_from(pin);
            }
        }
        record.args = arguments_digest(arguments).unwrap_or_default();
        record
    }

    /// What an approval of this call is bound to, as things are now.
    async fn binding(&self, target: &ToolRef, arguments: &str) -> ApprovalBinding {
        let scope = &self.trust.scope;
        let revision = self
            .registry
            .current()
            .servers
            .get(&target.server)
            .map_or(0, |r| r.mod_revision);
        let pin = match self.connections.catalog(&target.server).await {
            Ok(catalog) => catalog.definition_digest(&target.tool).unwrap_or_default(),
            Err(_) => String::new(),
        };
        ApprovalBinding {
            node_id: self.trust.node.node_id.clone(),
            task_id: scope.task_id.clone(),
            invocation_id: scope.invocation_id.clone(),
            identity: scope.identity.clone(),
            server_id: target.server.clone(),
            tool: target.tool.clone(),
            // Unparseable arguments get a digest too: the server will
            // refuse them, but the approval is still for exactly them.
            arguments_digest: arguments_digest(arguments).unwrap_or_else(|| {
                spear_proto::pins::digest(&serde_json::Value::String(arguments.to_string()))
            }),
            pin_digest: pin,
            policy_revision: revision,
        }
    }

    /// How long the approval may wait: its rule's expiry, never past the
    /// run's deadline.
    fn expires_in(&self, target: &ToolRef) -> Duration {
        let rule = self
            .registry
            .current()
            .servers
            .get(&target.server)
            .and_then(|r| r.spec.as_ref())
            .and_then(|s| s.approval.as_ref())
            .map_or(0, |a| a.expires_ms);
        let wanted = match rule {
            0 => DEFAULT_EXPIRY,
            ms => Duration::from_millis(ms),
        };
        match self.trust.scope.deadline {
            Some(deadline) => wanted.min(deadline.saturating_duration_since(Instant::now())),
            None => wanted,
        }
    }

    /// Asks for, waits on and claims an approval of this call. `Err` is
    /// the outcome to record and what to tell the model.
    pub(super) async fn approve(
        &self,
        target: &ToolRef,
        arguments: &str,
        record: &Record,
    ) -> Result<ApprovalNote, (Outcome, ApprovalNote)> {
        let unavailable =
            |why: String| (Outcome::Failed, ApprovalNote::new("", "unavailable", why));
        let Some(approver) = &self.trust.node.approvals else {
            return Err(unavailable("this node is not connected to SMS".into()));
        };
        let binding = self.binding(target, arguments).await;
        // Never a secret of the server's to SMS in clear.
        let shown = self.connections.redact(&target.server, arguments);
        let id = approver
            .request(binding, shown, self.expires_in(target))
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        self.trust.audit(Record {
            outcome: Outcome::Waiting,
            approval: id.clone(),
            ..record.clone()
        });
        let decided = approver
            .wait(&self.trust.node.node_id, &id)
            .await
            .map_err(|e| {
                (
                    Outcome::Failed,
                    ApprovalNote::new(&id, "unavailable", e.to_string()),
                )
            })?;
        match decided.state {
            ApprovalState::Approved => {
                let now = self.binding(target, arguments).await;
                approver.claim(&id, now).await.map_err(|e| {
                    (
                        Outcome::Denied,
                        ApprovalNote::new(&id, "refused", e.to_string()),
                    )
                })?;
                Ok(ApprovalNote::new(&id, "approved", decided.decided_by))
            }
            ApprovalState::Denied => Err((
                Outcome::ApprovalDenied,
                ApprovalNote::new(&id, "denied", decided.reason),
            )),
            ApprovalState::Expired => Err((
                Outcome::Expired,
                ApprovalNote::new(&id, "expired", decided.reason),
            )),
            other => Err((
                Outcome::Failed,
                ApprovalNote::new(&id, "refused", format!("SMS answered {other:?}")),
            )),
        }
    }
}
