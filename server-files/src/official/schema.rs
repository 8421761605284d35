//! The published JSON Schemas of `server.json`, and the check that a file
//! follows the one it declares.
//!
//! Entry point: [`check`]. The schemas are the registry's own, byte for
//! byte, kept in `server-files/schemas/server-json/` (see its README): SMS never
//! fetches one, so a file is judged the same way on every replica, offline,
//! and by the rules its publisher was held to. A file that declares no
//! published schema (the pre-release draft, a date this SMS does not keep,
//! another host) is refused: there is nothing to hold it to, and the
//! argv built from it is only as safe as the shape it was built from.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::{Map, Value};

use super::super::fields::Problems;

/// The schemas SMS keeps, by the date in their URL.
const KEPT: &[(&str, &str)] = &[
    (
        "2025-07-09",
        include_str!("../../schemas/server-json/2025-07-09.schema.json"),
    ),
    (
        "2025-09-16",
        include_str!("../../schemas/server-json/2025-09-16.schema.json"),
    ),
    (
        "2025-09-29",
        include_str!("../../schemas/server-json/2025-09-29.schema.json"),
    ),
    (
        "2025-10-11",
        include_str!("../../schemas/server-json/2025-10-11.schema.json"),
    ),
    (
        "2025-10-17",
        include_str!("../../schemas/server-json/2025-10-17.schema.json"),
    ),
    (
        "2025-12-11",
        include_str!("../../schemas/server-json/2025-12-11.schema.json"),
    ),
];

/// Where the published schemas live: `https://HOST/schemas/DATE/server.schema.json`.
const HOSTS: &[&str] = &[
    "https://static.modelcontextprotocol.io/schemas/",
    "https://modelcontextprotocol.io/schemas/",
];
const FILE_NAME: &str = "/server.schema.json";

/// Schema errors a refusal names; the rest are counted.
const MAX_ERRORS: usize = 3;

/// Each kept schema, compiled once. A schema that does not compile is a
/// build defect (they are fixed bytes), reported as a refusal rather than
/// a panic.
fn validators() -> &'static HashMap<&'static str, Result<Validator, Uncompiled>> {
    static COMPILED: OnceLock<HashMap<&'static str, Result<Validator, Uncompiled>>> =
        OnceLock::new();
    COMPILED.get_or_init(|| {
        KEPT.iter()
            .map(|(date, text)| {
                let compiled = serde_json::from_str::<Value>(text)
                    .map_err(Uncompiled::Json)
                    .and_then(|schema| {
                        jsonschema::draft7::new(&schema)
                            .map_err(|e| Uncompiled::Schema(e.to_string()))
                    });
                (*date, compiled)
            })
            .collect()
    })
}

/// Why a kept schema does not compile (a defect of the build).
#[derive(Debug, thiserror::Error)]
enum Uncompiled {
    #[error("it is not JSON: {0}")]
    Json(serde_json::Error),
    /// jsonschema's error borrows the schema; its sentence is kept.
    #[error("{0}")]
    Schema(String),
}

/// Why a file's `$schema` cannot be held to a schema this SMS keeps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Undeclared {
    #[error("it declares no \"$schema\" (the registry's pre-release draft shape); publish it against a published schema ({kept})")]
    Missing { kept: String },
    #[error("its \"$schema\" is not a published server.json schema this SMS keeps (https://static.modelcontextprotocol.io/schemas/DATE/server.schema.json, DATE one of {kept}); a draft or newer schema needs a newer SMS")]
    Unknown { kept: String },
}

/// The dates of the kept schemas, for sentences.
fn kept_dates() -> String {
    KEPT.iter()
        .map(|(date, _)| *date)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The date of the published schema `root` declares, or why it declares
/// none SMS can hold it to.
pub fn declared(root: &Map<String, Value>) -> Result<&'static str, Undeclared> {
    let Some(url) = root.get("$schema").and_then(Value::as_str) else {
        return Err(Undeclared::Missing { kept: kept_dates() });
    };
    let date = HOSTS
        .iter()
        .find_map(|host| url.strip_prefix(host))
        .and_then(|rest| rest.strip_suffix(FILE_NAME));
    let known = date.and_then(|d| KEPT.iter().find(|(kept, _)| *kept == d));
    match known {
        Some((date, _)) => Ok(date),
        None => Err(Undeclared::Unknown { kept: kept_dates() }),
    }
}

/// `/packages/1/version` as the path problems use: `$.packages[1].version`.
fn json_path(pointer: &str) -> String {
    let mut path = String::from("$");
    for part in pointer.split('/').skip(1) {
        if part.bytes().all(|b| b.is_ascii_digit()) && !part.is_empty() {
            path.push_str(&format!("[{part}]"));
        } else {
            path.push('.');
            path.push_str(&part.replace("~1", "/").replace("~0", "~"));
        }
    }
    path
}

/// Checks `root` against the schema it declares; each way it does not
/// follow it is a problem, so the file is refused by name. Values are
/// masked in the sentences: a file's text is the publisher's, not ours to
/// echo into logs.
pub fn check(problems: &mut Problems, root: &Map<String, Value>) -> bool {
    let date = match declared(root) {
        Ok(date) => date,
        Err(why) => {
            problems.push("$.$schema", why.to_string());
            return false;
        }
    };
    let validator = match validators().get(date) {
        Some(Ok(validator)) => validator,
        Some(Err(why)) => {
            problems.push("$.$schema", format!("the kept {date} schema does not compile ({why}); this SMS build is broken, report it"));
            return false;
        }
        // `declared` only answers kept dates; said anyway, never silent.
        None => {
            problems.push("$.$schema", format!("no kept schema for {date}"));
            return false;
        }
    };
    let instance = Value::Object(root.clone());
    let errors: Vec<_> = validator.iter_errors(&instance).collect();
    for error in errors.iter().take(MAX_ERRORS) {
        let path = json_path(&error.instance_path().to_string());
        problems.push(
            &path,
            format!(
                "does not follow the {date} server.json schema the file declares: {}",
                error.masked()
            ),
        );
    }
    if errors.len() > MAX_ERRORS {
        problems.push(
            "$",
            format!(
                "and {} more ways it does not follow the {date} schema",
                errors.len() - MAX_ERRORS
            ),
        );
    }
    errors.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kept_schema_compiles() {
        for (date, compiled) in validators() {
            assert!(
                compiled.is_ok(),
                "{date}: {compiled:?}",
                compiled = compiled.as_ref().err()
            );
        }
        assert_eq!(validators().len(), KEPT.len());
    }

    #[test]
    fn only_published_schemas_are_declared() {
        let with = |url: &str| {
            json!({"$schema": url})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            declared(&with(
                "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
            )),
            Ok("2025-12-11")
        );
        for url in [
            "https://modelcontextprotocol.io/schemas/draft/2025-07-09/server.json",
            "https://static.modelcontextprotocol.io/schemas/2030-01-01/server.schema.json",
            "https://evil.example/static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        ] {
            assert!(declared(&with(url)).is_err(), "{url}");
        }
        assert!(declared(&Map::new())
            .unwrap_err()
            .to_string()
            .contains("no \"$schema\""));
    }

    #[test]
    fn pointers_become_problem_paths() {
        assert_eq!(json_path(""), "$");
        assert_eq!(json_path("/packages/1/version"), "$.packages[1].version");
        assert_eq!(json_path("/a~1b"), "$.a/b");
    }
}
