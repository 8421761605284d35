//! Reading the values of a server entry: each reader takes a JSON value at
//! a path, returns what it could read, and records every problem with its
//! path in [`Problems`] (bounded per file) instead of stopping at the first.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::problem::Problem;
use spear_proto::patterns::check_pattern;
use spear_proto::refs::{check_references, is_env_name};
use spear_proto::suggest::closest;

/// Problems reported per file at most; the rest are counted.
pub const MAX_PROBLEMS: usize = 50;

/// Collects problems for one file.
pub struct Problems {
    file: String,
    pub list: Vec<Problem>,
}

impl Problems {
    pub fn new(file: &str) -> Self {
        Self {
            file: file.to_string(),
            list: Vec::new(),
        }
    }

    pub fn push(&mut self, path: &str, message: impl Into<String>) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(Problem {
                file: self.file.clone(),
                path: path.to_string(),
                message: message.into(),
            });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// "a string", "an array", ...: what a value is, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn unknown_keys(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    known: &[&str],
) {
    for key in entry.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let hint = match closest(key, known) {
            Some(k) => format!("; did you mean '{k}'?"),
            None => format!("; known keys are {}", known.join(", ")),
        };
        problems.push(
            &format!("{path}.{key}"),
            format!("unknown key '{key}'{hint}"),
        );
    }
}

pub(super) fn string(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    key: &str,
) -> Option<String> {
    match entry.get(key)? {
        Value::String(s) => Some(s.clone()),
        other => {
            problems.push(
                &format!("{path}.{key}"),
                format!("expected a string, found {}", kind(other)),
            );
            None
        }
    }
}

pub(super) fn string_list(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    key: &str,
    refs: bool,
) -> Option<Vec<String>> {
    let value = entry.get(key)?;
    let Value::Array(items) = value else {
        problems.push(
            &format!("{path}.{key}"),
            format!("expected an array of strings, found {}", kind(value)),
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => {
                if refs {
                    if let Err(message) = check_references(s) {
                        problems.push(&format!("{path}.{key}[{i}]"), message.to_string());
                    }
                }
                out.push(s.clone());
            }
            other => problems.push(
                &format!("{path}.{key}[{i}]"),
                format!("expected a string, found {}", kind(other)),
            ),
        }
    }
    Some(out)
}

/// Which names a string map's keys must be.
#[derive(Clone, Copy)]
pub(super) enum MapKind {
    Env,
    Header,
}

pub(super) fn string_map(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    key: &str,
    map: MapKind,
) -> Option<HashMap<String, String>> {
    let value = entry.get(key)?;
    let Value::Object(object) = value else {
        problems.push(
            &format!("{path}.{key}"),
            format!("expected an object of strings, found {}", kind(value)),
        );
        return None;
    };
    let mut out = HashMap::with_capacity(object.len());
    for (name, value) in object {
        let at = format!("{path}.{key}.{name}");
        let name_ok = match map {
            MapKind::Env => is_env_name(name),
            MapKind::Header => !name.is_empty() && name.bytes().all(is_token_byte),
        };
        if !name_ok {
            let what = match map {
                MapKind::Env => "is not a valid environment variable name (letters, digits and '_', not starting with a digit)",
                MapKind::Header => "is not a valid HTTP header name",
            };
            problems.push(&at, format!("'{}' {what}", name.escape_default()));
        }
        match value {
            Value::String(v) => {
                if let Err(message) = check_references(v) {
                    problems.push(&at, format!("value {message}"));
                }
                out.insert(name.clone(), v.clone());
            }
            // Never echo the value: it may be a secret.
            other => problems.push(
                &at,
                format!("expected a string value, found {}", kind(other)),
            ),
        }
    }
    Some(out)
}

pub(super) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

pub(super) fn patterns(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    key: &str,
) -> Option<Vec<String>> {
    let list = string_list(problems, path, entry, key, false)?;
    for (i, pattern) in list.iter().enumerate() {
        if let Err(message) = check_pattern(pattern) {
            problems.push(&format!("{path}.{key}[{i}]"), message.to_string());
        }
    }
    Some(list)
}

pub(super) fn bounded(
    problems: &mut Problems,
    at: &str,
    value: &Value,
    max: u64,
    unit: &str,
) -> u64 {
    match value.as_u64() {
        Some(n) if (1..=max).contains(&n) => n,
        _ => {
            let found = match value {
                Value::Number(n) => format!("{n}"),
                other => kind(other).to_string(),
            };
            problems.push(
                at,
                format!("expected a whole number of {unit} from 1 to {max}, found {found}"),
            );
            0
        }
    }
}

pub(super) fn object<'a>(
    problems: &mut Problems,
    path: &str,
    entry: &'a Map<String, Value>,
    key: &str,
    known: &[&str],
) -> Option<&'a Map<String, Value>> {
    let value = entry.get(key)?;
    let Value::Object(object) = value else {
        problems.push(
            &format!("{path}.{key}"),
            format!("expected an object, found {}", kind(value)),
        );
        return None;
    };
    unknown_keys(problems, &format!("{path}.{key}"), object, known);
    Some(object)
}

pub(super) fn boolean(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    key: &str,
) -> Option<bool> {
    match entry.get(key)? {
        Value::Bool(b) => Some(*b),
        other => {
            problems.push(
                &format!("{path}.{key}"),
                format!("expected true or false, found {}", kind(other)),
            );
            None
        }
    }
}
