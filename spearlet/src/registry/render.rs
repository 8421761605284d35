//! The registry as people read it: a table, or JSON with secrets redacted.

use serde_json::{json, Value};
use spear_proto::v1::{Elicitation, OauthGrant, SealedPlace, ServerRecord, Transport};

use super::RegistryView;

/// Replaces env and header values, which may be secrets.
const REDACTED: &str = "<redacted>";

fn record_json(record: &ServerRecord) -> Value {
    let spec = record.spec.clone().unwrap_or_default();
    let redact = |map: &std::collections::HashMap<String, String>| -> Value {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        Value::Object(
            keys.into_iter()
                .map(|k| (k.clone(), Value::from(REDACTED)))
                .collect(),
        )
    };
    json!({
        "spec": {
            "id": spec.id,
            "description": spec.description,
            "transport": Transport::label_of(spec.transport),
            "command": spec.command,
            "args": spec.args,
            "env": redact(&spec.env),
            "cwd": spec.cwd,
            "url": spec.url,
            "headers": redact(&spec.headers),
            "allowed_tools": spec.allowed_tools.map(|p| p.patterns),
            "denied_tools": spec.denied_tools,
            "timeouts_ms": spec.timeouts.map(|t| json!({"startup": t.startup_ms, "list_tools": t.list_tools_ms, "call": t.call_ms, "call_max": t.call_max_ms, "relist": t.relist_ms})),
            "limits": spec.limits.map(|l| json!({"max_concurrency": l.max_concurrency, "max_output_bytes": l.max_output_bytes, "max_tools": l.max_tools})),
            // Which values SMS sealed, by place and name; their bytes
            // open only at SMS.
            "sealed": spec.sealed.iter().map(|v| format!(
                "{}.{}",
                if v.place == SealedPlace::Header as i32 { "headers" } else { "env" },
                v.name
            )).collect::<Vec<_>>(),
            "enabled": spec.enabled,
            "elicitation": Elicitation::of(spec.elicitation).label(),
            // Secrets here are ${NAME} references (SMS refuses anything
            // else), so they show as written.
            "auth": spec.auth.map(|a| json!({
                "grant": OauthGrant::label_of(a.grant),
                "client_id": a.client_id,
                "client_secret": a.client_secret,
                "client_metadata_url": a.client_metadata_url,
                "scopes": a.scopes,
                "private_key": a.private_key,
                "signing_algorithm": a.signing_algorithm,
                "idp": a.idp.map(|i| json!({
                    "issuer": i.issuer, "token_endpoint": i.token_endpoint, "client_id": i.client_id,
                    "client_secret": i.client_secret, "id_token": i.id_token,
                })),
            })),
            "quota": spec.quota.map(|q| json!({
                "calls": q.calls.map(|r| rate_json(&r)),
                "tools": q.tools.iter().map(|(tool, r)| (tool.clone(), rate_json(r))).collect::<serde_json::Map<_, _>>(),
                "on_unreachable": if q.allow_unreachable { "allow" } else { "refuse" },
            })),
        },
        "source": record.source_label(),
        "mod_revision": record.mod_revision,
    })
}

/// A quota's rate as its file writes it.
fn rate_json(rate: &spear_proto::v1::Rate) -> Value {
    json!({"max": rate.max, "per": spear_proto::quota::period_text(rate.per_ms)})
}

/// The whole view as JSON, env and header values redacted.
pub fn redacted_json(view: &RegistryView) -> Value {
    json!({
        "epoch": view.epoch,
        "revision": view.revision,
        "servers": view.servers.values().map(|r| record_json(r)).collect::<Vec<_>>(),
    })
}

/// A table: one line per server, after a header with the position.
pub fn table(view: &RegistryView) -> String {
    let mut out = format!(
        "epoch {} revision {} ({} servers)\n{:<32} {:<16} {:<8} {:<28} {:>10}\n",
        view.epoch,
        view.revision,
        view.servers.len(),
        "ID",
        "TRANSPORT",
        "ENABLED",
        "SOURCE",
        "REVISION"
    );
    for (id, record) in &view.servers {
        let spec = record.spec.clone().unwrap_or_default();
        out.push_str(&format!(
            "{:<32} {:<16} {:<8} {:<28} {:>10}\n",
            id,
            Transport::label_of(spec.transport),
            spec.enabled,
            record.source_label(),
            record.mod_revision
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use spear_proto::v1::ServerSpec;
    use std::sync::Arc;

    #[test]
    fn env_and_header_values_never_show() {
        let record = ServerRecord {
            spec: Some(ServerSpec {
                id: "fs".into(),
                env: [("TOKEN".to_string(), "sk-secret-1".to_string())].into(),
                headers: [(
                    "Authorization".to_string(),
                    "Bearer sk-secret-2".to_string(),
                )]
                .into(),
                ..Default::default()
            }),
            source: None,
            mod_revision: 4,
            pins: None,
        };
        let view = RegistryView {
            epoch: 1,
            revision: 4,
            servers: [("fs".to_string(), Arc::new(record))].into(),
        };
        let json = redacted_json(&view).to_string();
        assert!(json.contains("TOKEN") && json.contains("Authorization"));
        assert!(!json.contains("sk-secret"), "{json}");
        assert!(!table(&view).contains("sk-secret"));
        assert!(table(&view).contains("fs"));
    }
}
