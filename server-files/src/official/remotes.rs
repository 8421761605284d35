//! A remote of a server.json as a native entry: its URL with its
//! variables filled, and its headers.

use serde_json::{json, Map, Value};

use super::super::values::{kind, Problems};
use super::unusable::Unusable;
use super::values::{field, fill, flag, literal, text, Companion, Filled};

/// A remote as native entry fields, or why not.
pub(super) fn remote_entry(
    problems: &mut Problems,
    path: &str,
    remote: &Map<String, Value>,
    companion: &Companion<'_>,
) -> Result<(Map<String, Value>, String), Unusable> {
    let transport = match text(remote, "type", "transport_type") {
        Some("streamable-http") | Some("streamable") | Some("http") => "streamable_http",
        Some("sse") => "sse",
        Some(other) => return Err(Unusable::RemoteType(other.to_string())),
        None => return Err(Unusable::Unnamed("type")),
    };
    let Some(url) = text(remote, "url", "url") else {
        return Err(Unusable::NoUrl);
    };
    let variables = field(remote, "variables", "variables").and_then(Value::as_object);
    let Filled::Value(url) = fill(problems, &format!("{path}.url"), url, variables, companion)
    else {
        return Err(Unusable::UrlVariable);
    };
    let mut headers = Map::new();
    if let Some(list) = field(remote, "headers", "headers").and_then(Value::as_array) {
        for (i, header) in list.iter().enumerate() {
            let at = format!("{path}.headers[{i}]");
            let Some(header) = header.as_object() else {
                problems.push(
                    &at,
                    format!("expected a header object, found {}", kind(header)),
                );
                continue;
            };
            let Some(name) = text(header, "name", "name") else {
                problems.push(&at, "a header without a \"name\"");
                continue;
            };
            let given = companion
                .get("headers")
                .and_then(Value::as_object)
                .and_then(|h| h.get(name))
                .and_then(Value::as_str);
            let secret = flag(header, "isSecret", "is_secret");
            let value = match (
                given,
                text(header, "value", "value"),
                text(header, "default", "default"),
            ) {
                (Some(given), _, _) => Some(given.to_string()),
                (None, Some(value), _) => {
                    let vars = field(header, "variables", "variables").and_then(Value::as_object);
                    match fill(problems, &format!("{at}.value"), value, vars, companion) {
                        Filled::Value(value) => Some(value),
                        Filled::Optional | Filled::Missing => None,
                    }
                }
                (None, None, Some(default)) if !secret => Some(literal(default)),
                _ if flag(header, "isRequired", "is_required") => {
                    problems.push(&at, format!("header {name} is required and has no value; give it in the companion file, as \"headers\": {{\"{name}\": \"${{NAME}}\"}}"));
                    None
                }
                _ => None,
            };
            if let Some(value) = value {
                headers.insert(name.to_string(), Value::String(value));
            }
        }
    }
    let mut entry = Map::new();
    entry.insert("transport".into(), json!(transport));
    entry.insert("url".into(), json!(url));
    if !headers.is_empty() {
        entry.insert("headers".into(), Value::Object(headers));
    }
    Ok((entry, format!("remote {url}")))
}
