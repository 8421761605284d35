//! Reading a server.json's values as real files write them: either field
//! name generation, flags, placeholders, exact versions, and `{var}`s
//! filled from the companion or the file's defaults.

use serde_json::{Map, Value};

use super::super::values::Problems;

/// A field by its camelCase name, or the snake_case one older files use.
pub(super) fn field<'a>(
    obj: &'a Map<String, Value>,
    camel: &str,
    snake: &str,
) -> Option<&'a Value> {
    obj.get(camel).or_else(|| obj.get(snake))
}

pub(super) fn text<'a>(obj: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<&'a str> {
    field(obj, camel, snake).and_then(Value::as_str)
}

pub(super) fn flag(obj: &Map<String, Value>, camel: &str, snake: &str) -> bool {
    field(obj, camel, snake)
        .or_else(|| obj.get("required").filter(|_| camel == "isRequired"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Text from the file as a literal in a server entry: a `${` in it is not
/// a reference.
pub(super) fn literal(text: &str) -> String {
    text.replace("${", "$${")
}

/// A placeholder a release tool should have filled in, if `text` holds one.
pub(super) fn placeholder(text: &str) -> Option<&'static str> {
    [
        ("${", "a ${...} placeholder"),
        ("{{", "a {{...}} placeholder"),
        ("<<", "a <<...>> placeholder"),
        ("<your", "a <your ...> placeholder"),
    ]
    .into_iter()
    .find(|(mark, _)| text.contains(mark))
    .map(|(_, what)| what)
}

/// Why `version` is not one exact version, if it is not.
pub(super) fn inexact(version: &str) -> Option<String> {
    if version.trim().is_empty() {
        return Some("is empty".into());
    }
    if let Some(what) = placeholder(version) {
        return Some(format!("'{version}' is {what} the release did not fill in"));
    }
    if version.eq_ignore_ascii_case("latest") {
        return Some("is 'latest', which names different bytes over time".into());
    }
    let ranged = version.starts_with(['^', '~', '>', '<', '=', '*'])
        || version.contains("||")
        || version.contains(" - ")
        || version.split('.').any(|p| p == "x" || p == "X" || p == "*");
    ranged.then(|| format!("'{version}' is a range, not one version"))
}

/// The companion's settings, or none.
pub(super) struct Companion<'a> {
    pub(super) settings: Option<&'a Map<String, Value>>,
}

impl<'a> Companion<'a> {
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.settings.and_then(|s| s.get(key))
    }

    /// What the companion says variable `name` is, if anything.
    pub(super) fn variable(&self, name: &str) -> Option<&'a str> {
        self.get("variables")
            .and_then(Value::as_object)
            .and_then(|v| v.get(name))
            .and_then(Value::as_str)
    }
}

/// What filling a value's `{var}`s gave.
pub(super) enum Filled {
    Value(String),
    /// A variable the file marks optional has no value: leave the
    /// argument (or header) out.
    Optional,
    /// A required variable has no value; the problem is recorded.
    Missing,
}

/// `value` with each `{var}` filled from `variables` (a map of variable
/// definitions): the companion's value, else the variable's `default`
/// (not for a secret: that comes from the companion, as a reference).
pub(super) fn fill(
    problems: &mut Problems,
    path: &str,
    value: &str,
    variables: Option<&Map<String, Value>>,
    companion: &Companion<'_>,
) -> Filled {
    let mut out = String::new();
    let mut rest = value;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let name = &rest[open + 1..open + close];
        let simple = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        out.push_str(&literal(&rest[..open]));
        if !simple {
            out.push_str(&literal(&rest[open..open + close + 1]));
            rest = &rest[open + close + 1..];
            continue;
        }
        let definition = variables
            .and_then(|v| v.get(name))
            .and_then(Value::as_object);
        let default = definition
            .filter(|d| !flag(d, "isSecret", "is_secret"))
            .and_then(|d| text(d, "default", "default"))
            .map(literal);
        // The operator's value may be a ${NAME} reference.
        match companion.variable(name).map(str::to_string).or(default) {
            Some(filled) => out.push_str(&filled),
            None if definition.is_some_and(|d| !flag(d, "isRequired", "is_required")) => {
                return Filled::Optional
            }
            None => {
                problems.push(
                    path,
                    format!("{{{name}}} has no value: give it in the companion file, as \"variables\": {{\"{name}\": \"...\"}} (a secret as a ${{NAME}} reference)"),
                );
                return Filled::Missing;
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(&literal(rest));
    Filled::Value(out)
}
