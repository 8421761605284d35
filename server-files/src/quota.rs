//! `"quota"` of a server file: calls to the server, or to one of its
//! tools, across the fleet (docs/quotas.md). The shape and its checks are
//! [`spear_proto::quota::ServerQuotaSpec`]'s, shared with nodes.

use serde_json::{Map, Value};
use spear_proto::quota::ServerQuotaSpec;
use spear_proto::v1::ServerQuota;

use super::values::Problems;

/// Parses `entry["quota"]` of a server at `path`.
pub fn quota(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
) -> Option<ServerQuota> {
    let value = entry.get("quota")?;
    let at = format!("{path}.quota");
    let spec: ServerQuotaSpec = match serde_json::from_value(value.clone()) {
        Ok(spec) => spec,
        Err(error) => {
            problems.push(
                &at,
                format!("{error}; write {{\"calls\": {{\"max\": 100, \"per\": \"1m\"}}, \"tools\": {{\"<tool>\": {{...}}}}, \"on_unreachable\": \"refuse\"}}"),
            );
            return None;
        }
    };
    match spec.to_proto() {
        Ok(quota) => Some(quota),
        Err(error) => {
            // The error names the key below "quota".
            problems.push(path, error.to_string());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> (Option<ServerQuota>, Vec<String>) {
        let entry: Map<String, Value> = serde_json::from_str(json).unwrap();
        let mut problems = Problems::new("s.json");
        let quota = quota(&mut problems, "$", &entry);
        let said = problems.list.iter().map(|p| p.to_string()).collect();
        (quota, said)
    }

    #[test]
    fn a_server_quota_limits_calls_and_single_tools() {
        let (quota, said) = parse(
            r#"{"quota": {"calls": {"max": 100, "per": "1m"}, "tools": {"search": {"max": 5, "per": "1h"}}}}"#,
        );
        assert!(said.is_empty(), "{said:?}");
        let quota = quota.unwrap();
        assert_eq!(quota.calls.unwrap().max, 100);
        assert_eq!(quota.tools["search"].per_ms, 3_600_000);
        assert!(!quota.allow_unreachable, "refuse is the default");
    }

    #[test]
    fn each_mistake_names_its_key() {
        for (json, expected) in [
            (
                r#"{"quota": {"calls": {"max": 0, "per": "1m"}}}"#,
                "quota.calls.max is 0",
            ),
            (
                r#"{"quota": {"tools": {"x": {"max": 1, "per": "1y"}}}}"#,
                "quota.tools.x.per is '1y'",
            ),
            (
                r#"{"quota": {"call": {"max": 1, "per": "1m"}}}"#,
                "unknown field `call`",
            ),
            (r#"{"quota": {}}"#, "quota limits nothing"),
            (r#"{"quota": {"calls": 5}}"#, "expected struct RateSpec"),
            (
                r#"{"quota": {"calls": {"max": 1, "per": "1m"}, "on_unreachable": "maybe"}}"#,
                "unknown variant `maybe`",
            ),
        ] {
            let (quota, said) = parse(json);
            assert!(quota.is_none(), "{json}");
            assert!(
                said.iter().any(|s| s.contains(expected)),
                "{json}: {said:?}"
            );
        }
    }
}
