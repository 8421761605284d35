//! `${NAME}` and `${NAME:-default}` references.
//!
//! In server files and in a task's `wasi.env`. SMS only checks that
//! references are well formed; nodes resolve them from their own
//! environment, so secrets never pass through SMS. The one exception is a
//! server's OAuth client (`auth`): SMS renews the cluster's tokens, so it
//! resolves that server's URL and client secret from its own environment
//! ([`substitute`]). `$${` stands for a literal `${`.

/// One piece of a text that may hold references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Literal text (`$${` already turned into `${`).
    Text(&'a str),
    /// `${name}` or `${name:-default}`.
    Ref {
        name: &'a str,
        default: Option<&'a str>,
    },
}

/// A malformed reference. Never quotes the text around it (it may hold a
/// secret), at most the reference's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("has an unterminated '${{'; close it with '}}' or write '$${{' for a literal '${{'")]
    Unterminated,
    #[error("has a reference '${{{0}}}' whose name is not a valid variable name (letters, digits and '_', not starting with a digit)")]
    BadName(String),
}

/// Splits `text` into [`Piece`]s: the one grammar SMS checks and nodes
/// resolve with. Stops after the first error.
pub fn pieces(text: &str) -> Pieces<'_> {
    Pieces { rest: text }
}

/// The iterator [`pieces`] returns.
#[derive(Debug, Clone)]
pub struct Pieces<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Result<Piece<'a>, RefError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        if rest.is_empty() {
            return None;
        }
        if let Some(after) = rest.strip_prefix("$${") {
            self.rest = after;
            return Some(Ok(Piece::Text("${")));
        }
        if let Some(after) = rest.strip_prefix("${") {
            self.rest = "";
            let Some(end) = after.find('}') else {
                return Some(Err(RefError::Unterminated));
            };
            let inner = &after[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            if !is_env_name(name) {
                return Some(Err(RefError::BadName(name.chars().take(64).collect())));
            }
            self.rest = &after[end + 1..];
            return Some(Ok(Piece::Ref { name, default }));
        }
        // Literal text up to the next '$' (a lone '$' is literal too),
        // stepping over the first character whatever its width.
        let first = rest.chars().next().map_or(1, char::len_utf8);
        let end = rest[first..].find('$').map_or(rest.len(), |at| at + first);
        self.rest = &rest[end..];
        Some(Ok(Piece::Text(&rest[..end])))
    }
}

/// Checks every reference in `text`.
pub fn check_references(text: &str) -> Result<(), RefError> {
    pieces(text).try_for_each(|piece| piece.map(drop))
}

/// Names of environment variables: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// True when an `env` or `headers` value is written out rather than
/// referenced: what a secret looks like in a Claude Desktop file. Such
/// values are accepted, but only nodes ever see them.
pub fn is_literal(value: &str) -> bool {
    !value.is_empty() && !pieces(value).any(|p| !matches!(p, Ok(Piece::Text(_))))
}

/// What a literal value is shown as to anyone but a node.
pub const REDACTED: &str = "<redacted>";

/// `spec` as callers other than nodes see it: literal `env` and `headers`
/// values replaced by [`REDACTED`]; references kept (they hold no secret).
pub fn redact_literals(spec: &mut crate::v1::ServerSpec) {
    for value in spec.env.values_mut().chain(spec.headers.values_mut()) {
        if is_literal(value) {
            *value = REDACTED.to_string();
        }
    }
}

/// The variable's name when `text` is exactly one reference with no
/// default: the only way a secret may be written (a default would be the
/// secret in clear).
pub fn sole_reference(text: &str) -> Option<&str> {
    let mut all = pieces(text);
    match (all.next(), all.next()) {
        (
            Some(Ok(Piece::Ref {
                name,
                default: None,
            })),
            None,
        ) => Some(name),
        _ => None,
    }
}

/// Why [`evaluate`] could not resolve a text; `E` is why a lookup refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError<E> {
    #[error(transparent)]
    Malformed(RefError),
    /// The variable may not be read here.
    #[error("${{{name}}} may not be read")]
    Refused { name: String, why: E },
    #[error("${{{0}}} is not set")]
    Unset(String),
}

/// `text` with each reference replaced: the one evaluator SMS and nodes
/// share. `${NAME}` is `lookup(NAME)`, and an error when unset;
/// `${NAME:-default}` is the default when `NAME` is unset **or empty**, as
/// in a shell. `on_value` sees each value that came from `lookup` (not a
/// default): the node keeps them as secrets.
pub fn evaluate<E>(
    text: &str,
    lookup: &dyn Fn(&str) -> Result<Option<String>, E>,
    on_value: &mut dyn FnMut(&str),
) -> Result<String, EvalError<E>> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        let (name, default) = match piece.map_err(EvalError::Malformed)? {
            Piece::Text(text) => {
                out.push_str(text);
                continue;
            }
            Piece::Ref { name, default } => (name, default),
        };
        let found = lookup(name)
            .map_err(|why| EvalError::Refused {
                name: name.to_string(),
                why,
            })?
            .filter(|value| !value.is_empty() || default.is_none());
        match (found, default) {
            (Some(value), _) => {
                on_value(&value);
                out.push_str(&value);
            }
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(EvalError::Unset(name.to_string())),
        }
    }
    Ok(out)
}

/// Why [`substitute`] could not resolve a text.
pub type SubstituteError = EvalError<std::convert::Infallible>;

/// `text` resolved with [`evaluate`] against `lookup`: for the few values
/// SMS itself must resolve (an OAuth server's URL and client secret, which
/// it renews tokens with).
pub fn substitute(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SubstituteError> {
    evaluate(text, &|name| Ok(lookup(name)), &mut |_| {})
}

/// How references evaluate, as a table: `(text, the environment, the
/// result or the unset name)`. SMS's [`substitute`] and the node's resolver
/// are both tested against it, so they cannot disagree.
#[doc(hidden)]
pub const EVALUATION_TABLE: &[(&str, &[(&str, &str)], Result<&str, &str>)] = &[
    ("plain", &[], Ok("plain")),
    ("${X}", &[("X", "v")], Ok("v")),
    ("${X}", &[("X", "")], Ok("")),
    ("${X}", &[], Err("X")),
    ("${X:-d}", &[("X", "v")], Ok("v")),
    ("${X:-d}", &[("X", "")], Ok("d")),
    ("${X:-d}", &[], Ok("d")),
    ("${X:-}", &[], Ok("")),
    ("a${X}b${Y:-c}", &[("X", "1")], Ok("a1bc")),
    ("$${X} $5", &[("X", "v")], Ok("${X} $5")),
    ("Bearer ${TOKEN}", &[("TOKEN", "t")], Ok("Bearer t")),
];

/// True when `text` starts with a reference (a URL given entirely by one).
pub fn starts_with_reference(text: &str) -> bool {
    text.starts_with("${")
}

#[cfg(test)]
mod tests {
    #[test]
    fn substitute_follows_the_evaluation_table() {
        for (text, env, want) in super::EVALUATION_TABLE {
            let lookup = |name: &str| {
                env.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            };
            let got = super::substitute(text, &lookup);
            match want {
                Ok(value) => assert_eq!(got, Ok(value.to_string()), "{text} with {env:?}"),
                Err(name) => assert_eq!(
                    got,
                    Err(super::SubstituteError::Unset(name.to_string())),
                    "{text} with {env:?}"
                ),
            }
        }
    }

    use super::*;

    #[test]
    fn a_sole_reference_is_one_reference_and_nothing_else() {
        assert_eq!(sole_reference("${CLIENT_SECRET}"), Some("CLIENT_SECRET"));
        assert_eq!(sole_reference("${SECRET:-hunter2}"), None);
        assert_eq!(sole_reference("x${SECRET}"), None);
        assert_eq!(sole_reference("${A}${B}"), None);
        assert_eq!(sole_reference("hunter2"), None);
    }

    #[test]
    fn literal_values_are_those_without_a_reference() {
        assert!(is_literal("sk-live-123"));
        assert!(is_literal("a $${NOT} reference"));
        assert!(!is_literal("Bearer ${TOKEN}"));
        assert!(!is_literal("${TOKEN}"));
        assert!(!is_literal(""));
    }

    #[test]
    fn text_splits_into_literals_and_references() {
        let got: Vec<Piece> = pieces("a $${x} ${A} $5 ${B:-d}")
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            got,
            vec![
                Piece::Text("a "),
                Piece::Text("${"),
                Piece::Text("x} "),
                Piece::Ref {
                    name: "A",
                    default: None
                },
                Piece::Text(" "),
                Piece::Text("$5 "),
                Piece::Ref {
                    name: "B",
                    default: Some("d")
                },
            ]
        );
    }

    /// Found by the server_json fuzz target: text that starts with a
    /// character wider than a byte, before a `$`, split inside it.
    #[test]
    fn text_of_any_characters_splits_on_character_boundaries() {
        use super::{check_references, pieces, Piece};
        for text in ["é", "é${X}", "޹$:{", "日本$", "€$$${A}b", "$é"] {
            let parts: Vec<_> = pieces(text).collect();
            assert!(!parts.is_empty(), "{text}");
            let _ = check_references(text);
        }
        let parts: Vec<_> = pieces("é${X}").collect();
        assert_eq!(parts[0], Ok(Piece::Text("é")));
        assert_eq!(
            parts[1],
            Ok(Piece::Ref {
                name: "X",
                default: None
            })
        );
    }

    #[test]
    fn well_formed_references_pass() {
        for ok in [
            "plain",
            "${TOKEN}",
            "Bearer ${TOKEN}",
            "${A:-default}",
            "${A:-}",
            "$${literal}",
            "$5",
            "a$b",
        ] {
            assert!(check_references(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn bad_references_fail_without_quoting_the_value() {
        let err = check_references("secret-value ${TOKEN").unwrap_err();
        assert_eq!(err, RefError::Unterminated);
        assert!(!err.to_string().contains("secret-value"));
        let err = check_references("secret-value ${1BAD}").unwrap_err();
        assert_eq!(err, RefError::BadName("1BAD".into()));
        assert!(!err.to_string().contains("secret-value"));
        assert!(check_references("${}").is_err());
        assert!(check_references("${A-B}").is_err());
    }
}
