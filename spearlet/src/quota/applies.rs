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

#[cfg(test)]
mod tests {
    use super::*;
    use spear_proto::v1::Rate;

    fn quota(json: &str) -> TaskQuota {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_call_counts_against_its_task_its_server_and_its_tool() {
        let task = quota(r#"{"tool_calls": {"max": 3, "per": "1m"}}"#);
        let rate = Rate {
            max: 9,
            per_ms: 60_000,
        };
        let server = ServerQuota {
            calls: Some(rate),
            tools: [("search".to_string(), rate)].into(),
            allow_unreachable: true,
        };
        let keys = call_keys(
            ("notes", Some(&task)),
            "alice",
            ("web", Some(&server)),
            "search",
        );
        let meters: Vec<QuotaMeter> = keys.iter().map(|k| k.key.meter()).collect();
        assert_eq!(
            meters,
            [
                QuotaMeter::TaskToolCalls,
                QuotaMeter::ServerCalls,
                QuotaMeter::ServerToolCalls
            ]
        );
        assert_eq!(keys[0].on_unreachable, OnUnreachable::Refuse);
        assert_eq!(keys[1].on_unreachable, OnUnreachable::Allow);
        assert!(
            keys.iter().all(|k| k.key.principal.is_empty()),
            "not per principal"
        );
        let other_tool = call_keys(("notes", None), "alice", ("web", Some(&server)), "fetch");
        assert_eq!(other_tool.len(), 1, "only the server's calls");
        assert!(call_keys(("notes", None), "alice", ("web", None), "fetch").is_empty());
    }

    #[test]
    fn a_per_principal_quota_is_each_principal_s_own() {
        let task = quota(
            r#"{"model_tokens": {"max": 10, "per": "1h"}, "cost_usd": {"max": 1, "per": "1d"}, "per_principal": true}"#,
        );
        let alice = model_keys("notes", Some(&task), "https://idp#alice");
        let bob = model_keys("notes", Some(&task), "https://idp#bob");
        assert_eq!(alice.len(), 2);
        assert_eq!(alice[0].key.principal, "https://idp#alice");
        assert_ne!(alice[0].key, bob[0].key);
        assert!(model_keys("notes", None, "x").is_empty());
    }
}
