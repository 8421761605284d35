//! What the node answers a server that asks for input during a call: the
//! 2025-11-25 `elicitation/create` request and the 2026-07-28
//! `input_required` result both come here (rmcp drives the retry of the
//! latter through the same handler).
//!
//! A node runs unattended, so the operator decides per server
//! ([`Elicitation`] in the server file): `decline` (the default) or
//! `accept_defaults`, which accepts with the defaults the requested schema
//! gives (SEP-1034) and declines when a required field has none. `spearlet
//! mcp call --elicitation prompt` asks on the terminal instead. Routing a
//! request to the guest that made the call is a later variant of
//! [`ElicitationPolicy`].

use std::io::{BufRead, IsTerminal};

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};
use spear_common::{safe_eprint, safe_eprintln};
use spear_proto::v1::Elicitation;

use super::server_log::ServerLog;

/// How one session answers elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ElicitationPolicy {
    /// Decline every request.
    #[default]
    Decline,
    /// Accept with the schema's defaults when every required field has one.
    AcceptDefaults,
    /// Ask on this process's terminal; decline when there is none.
    Prompt,
}

impl From<Elicitation> for ElicitationPolicy {
    fn from(value: Elicitation) -> Self {
        match value {
            Elicitation::Decline => ElicitationPolicy::Decline,
            Elicitation::AcceptDefaults => ElicitationPolicy::AcceptDefaults,
        }
    }
}

impl ElicitationPolicy {
    /// The answer to `request` under this policy, said in the server's
    /// log within its flood guard.
    pub async fn answer(self, log: &ServerLog, request: ElicitRequestParams) -> ElicitResult {
        let answer = match self {
            ElicitationPolicy::Decline => decline(),
            ElicitationPolicy::AcceptDefaults => accept_defaults(&request),
            ElicitationPolicy::Prompt => {
                let asked = request.clone();
                tokio::task::spawn_blocking(move || prompt(&asked))
                    .await
                    .unwrap_or_else(|_| decline())
            }
        };
        log.request(|server| {
            tracing::info!(
                server,
                policy = ?self,
                action = ?answer.action,
                "the server asked for input during a call"
            )
        });
        answer
    }
}

fn decline() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

/// The requested schema as plain JSON: the defaults are read the same way
/// whatever kind of property rmcp parsed them into.
fn schema_of(request: &ElicitRequestParams) -> Option<Map<String, Value>> {
    match request {
        ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } => match serde_json::to_value(requested_schema) {
            Ok(Value::Object(schema)) => Some(schema),
            _ => None,
        },
        // A URL elicitation needs a person with a browser.
        _ => None,
    }
}

/// Accepts with every default the schema gives; declines when a required
/// field has no default (accepting without it would be invalid) or the
/// request is not a form.
fn accept_defaults(request: &ElicitRequestParams) -> ElicitResult {
    let Some(schema) = schema_of(request) else {
        return decline();
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut content = Map::new();
    for (name, property) in properties.into_iter().flatten() {
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
    let required = schema.get("required").and_then(Value::as_array);
    let missing = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|name| !content.contains_key(name));
    if missing {
        return decline();
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
}

/// Asks on the terminal, field by field, with each default offered.
fn prompt(request: &ElicitRequestParams) -> ElicitResult {
    if !std::io::stdin().is_terminal() {
        safe_eprintln!("the server asked for input, but there is no terminal to ask on: declined");
        return decline();
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    // The server's words: shown escaped, never obeyed (docs/security.md).
    let mut ask = |question: &str| -> Option<String> {
        safe_eprint!("{question}");
        lines.next().and_then(Result::ok)
    };
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. } => {
            safe_eprintln!("The server asks: {message}");
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            safe_eprintln!("The server asks: {message}\nOpen {url}");
            return match ask("Done? [y/N] ").as_deref().map(str::trim) {
                Some("y" | "Y" | "yes") => ElicitResult::new(ElicitationAction::Accept),
                _ => decline(),
            };
        }
        #[allow(unreachable_patterns)]
        _ => return decline(),
    }
    match ask("Answer? [a]ccept / [d]ecline / [c]ancel: ")
        .as_deref()
        .map(str::trim)
    {
        Some("a" | "accept") => {}
        Some("c" | "cancel") => return ElicitResult::new(ElicitationAction::Cancel),
        _ => return decline(),
    }
    let Some(schema) = schema_of(request) else {
        return decline();
    };
    let mut content = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let default = property.get("default");
        let description = property
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let shown = default.map(|d| format!(" [{d}]")).unwrap_or_default();
        loop {
            let Some(line) = ask(&format!("{name} ({description}){shown}: ")) else {
                return decline();
            };
            let line = line.trim();
            if line.is_empty() {
                if let Some(default) = default {
                    content.insert(name.clone(), default.clone());
                }
                break;
            }
            match typed(property, line) {
                Some(value) => {
                    content.insert(name.clone(), value);
                    break;
                }
                None => safe_eprintln!("not a valid {name}; try again"),
            }
        }
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
}

/// A typed answer to one property, or `None` when it does not fit.
fn typed(property: &Value, line: &str) -> Option<Value> {
    let choices = property.get("enum").and_then(Value::as_array);
    if let Some(choices) = choices {
        return choices.iter().find(|c| c.as_str() == Some(line)).cloned();
    }
    match property.get("type").and_then(Value::as_str) {
        Some("integer") => line.parse::<i64>().ok().map(Value::from),
        Some("number") => line.parse::<f64>().ok().map(Value::from),
        Some("boolean") => match line {
            "true" | "yes" | "y" => Some(Value::Bool(true)),
            "false" | "no" | "n" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => Some(Value::String(line.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form",
            "message": "details?",
            "requestedSchema": schema,
        }))
        .unwrap()
    }

    #[test]
    fn accept_defaults_fills_every_default_of_the_schema() {
        let request = form(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "note": {"type": "string"}
            }
        }));
        let answer = accept_defaults(&request);
        assert_eq!(answer.action, ElicitationAction::Accept);
        assert_eq!(
            answer.content,
            Some(json!({"name": "John Doe", "age": 30, "score": 95.5,
                        "status": "active", "verified": true}))
        );
    }

    #[test]
    fn accept_defaults_declines_when_a_required_field_has_no_default() {
        let request = form(json!({
            "type": "object",
            "properties": {"token": {"type": "string"}, "n": {"type": "integer", "default": 1}},
            "required": ["token"]
        }));
        assert_eq!(accept_defaults(&request).action, ElicitationAction::Decline);
    }

    #[test]
    fn a_url_elicitation_is_declined_unattended() {
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "log in", "url": "https://example.com/x",
            "elicitationId": "e1"
        }))
        .unwrap();
        assert_eq!(accept_defaults(&request).action, ElicitationAction::Decline);
    }
}
