//! Which quotas a call or a model request counts against: the run's
//! task's (its config's `"quota"`) and the server's (its file's).

use spear_proto::quota::{OnUnreachable, TaskQuota};
use spear_proto::v1::{QuotaKey, QuotaMeter, ServerQuota};

/// One quota a call counts against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallQuota {
    pub key: QuotaKey,
    pub on_unreachable: OnUnreachable,
}

fn task_key(task_id: &str, quota: &TaskQuota, principal: &str, meter: QuotaMeter) -> CallQuota {
    CallQuota {
        key: QuotaKey {
            meter: meter as i32,
            id: task_id.to_string(),
            tool: String::new(),
            principal: if quota.per_principal {
                principal.to_string()
            } else {
                String::new()
            },
        },
        on_unreachable: quota.on_unreachable,
    }
}

/// The quotas a call of `tool` counts against, for a run of a task (its
/// id and its config's quota) for `principal`, on a server (its id and
/// its file's quota).
pub fn call_keys(
    (task_id, task): (&str, Option<&TaskQuota>),
    principal: &str,
    (server_id, server): (&str, Option<&ServerQuota>),
    tool: &str,
) -> Vec<CallQuota> {
    let mut keys = Vec::new();
    if let Some(quota) = task.filter(|q| q.tool_calls.is_some()) {
        keys.push(task_key(
            task_id,
            quota,
            principal,
            QuotaMeter::TaskToolCalls,
        ));
    }
    let Some(quota) = server else {
        return keys;
    };
    let on_unreachable = if quota.allow_unreachable {
        OnUnreachable::Allow
    } else {
        OnUnreachable::Refuse
    };
    let server_key = |meter: QuotaMeter, tool: &str| CallQuota {
        key: QuotaKey {
            meter: meter as i32,
            id: server_id.to_string(),
            tool: tool.to_string(),
            principal: String::new(),
        },
        on_unreachable,
    };
    if quota.calls.is_some() {
        keys.push(server_key(QuotaMeter::ServerCalls, ""));
    }
    if quota.tools.contains_key(tool) {
        keys.push(server_key(QuotaMeter::ServerToolCalls, tool));
    }
    keys
}

/// The quotas a model request of the run counts against: its task's
/// tokens and cost.
pub fn model_keys(task_id: &str, task: Option<&TaskQuota>, principal: &str) -> Vec<CallQuota> {
    let Some(quota) = task else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    if quota.model_tokens.is_some() {
        keys.push(task_key(
            task_id,
            quota,
            principal,
            QuotaMeter::TaskModelTokens,
        ));
    }
    if quota.cost_usd.is_some() {
        keys.push(task_key(task_id, quota, principal, QuotaMeter::TaskCost));
    }
    keys
}
