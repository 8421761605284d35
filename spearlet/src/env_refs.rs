//! `${NAME}` and `${NAME:-default}` resolved on the node, at connect time.
//!
//! SMS ships references verbatim; only the node that runs (or calls) the
//! server reads the values from its own environment. The values that came
//! from references are remembered as secrets so the child's stderr can be
//! redacted, and an unresolved reference is an error naming the variable and
//! the field, never a value.

use std::borrow::Cow;
use std::sync::{Arc, Weak};

use spear_proto::refs::{evaluate, EvalError, RefError};
use spear_proto::v1::ServerSpec;

pub use crate::node_policy::Refused;

/// Reads a variable of the node's environment for a reference, or says
/// which policy setting refuses it.
pub type LookupFn<'a> = dyn Fn(&str) -> Result<Option<String>, Refused> + Sync + 'a;

/// Why a server's references could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("{field} refers to ${{{name}}}, which this node does not let it read: {why}")]
    Refused {
        field: String,
        name: String,
        why: String,
    },
    #[error("{field} refers to ${{{name}}}, which is not set on this node; set it in the spearlet's environment or give a default with ${{{name}:-...}}")]
    Unset { field: String, name: String },
    #[error("{field} {why}")]
    Malformed { field: String, why: RefError },
}

/// Text with references replaced, plus the values that were substituted.
#[derive(Debug, Default)]
pub struct Resolver {
    /// Values substituted from the environment: never to be logged.
    pub secrets: Vec<String>,
}

impl Resolver {
    /// Resolves every reference in `text` with `lookup`
    /// ([`spear_proto::refs::evaluate`], the evaluator SMS uses too),
    /// keeping each value read as a secret. Errors name `field` and the
    /// variable, never a value.
    pub fn resolve(
        &mut self,
        field: &str,
        text: &str,
        lookup: &LookupFn<'_>,
    ) -> Result<String, ResolveError> {
        let secrets = &mut self.secrets;
        evaluate(text, lookup, &mut |value| {
            if !value.is_empty() {
                secrets.push(value.to_string());
            }
        })
        .map_err(|error| match error {
            EvalError::Malformed(why) => ResolveError::Malformed {
                field: field.to_string(),
                why,
            },
            EvalError::Refused { name, why } => ResolveError::Refused {
                field: field.to_string(),
                name,
                why: why.0,
            },
            EvalError::Unset(name) => ResolveError::Unset {
                field: field.to_string(),
                name,
            },
        })
    }

    /// Every secret `spec` substitutes on this node (its command, args,
    /// env, URL and headers), for redacting what is said about the server,
    /// and its literal `env` and `headers` values, which are secrets written
    /// out (as Claude Desktop files do). References that do not resolve
    /// add nothing.
    pub fn secrets_of(spec: &ServerSpec, lookup: &LookupFn<'_>) -> Resolver {
        let mut resolver = Resolver::default();
        let fields = [&spec.command, &spec.url]
            .into_iter()
            .chain(&spec.args)
            .chain(spec.env.values())
            .chain(spec.headers.values());
        for text in fields {
            let _ = resolver.resolve("", text, lookup);
        }
        let literals = spec.env.values().chain(spec.headers.values());
        for value in literals.filter(|v| spear_proto::refs::is_literal(v)) {
            resolver.secrets.push(value.clone());
        }
        resolver
    }

    /// The values the server's `env` and `headers` references resolve to:
    /// the credentials a server is handed, which a tool result must not
    /// carry to the model (a server that prints its environment). Values
    /// in its arguments, command and URL, and literal values, are left in
    /// results: a path or a setting is what a model may need to see.
    pub fn handed_to(spec: &ServerSpec, lookup: &LookupFn<'_>) -> Resolver {
        let mut resolver = Resolver::default();
        let references = spec
            .env
            .values()
            .chain(spec.headers.values())
            .filter(|v| !spear_proto::refs::is_literal(v));
        for text in references {
            let _ = resolver.resolve("", text, lookup);
        }
        resolver
    }

    /// A [`Redactor`] for the secrets substituted so far.
    pub fn redactor(&self) -> Redactor {
        let mut forms: Vec<String> = self
            .secrets
            .iter()
            .filter(|s| s.len() >= 4)
            .flat_map(|s| url_forms(s))
            .collect();
        // Longest first, so an encoded form is not cut by a shorter one.
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        Redactor { forms }
    }
}

/// Replaces secrets in text: each as written and as a URL's path or query
/// carries it (HTTP errors name the URL). Secrets shorter than 4 bytes are
/// left alone: they would redact words.
#[derive(Debug, Default)]
pub struct Redactor {
    forms: Vec<String>,
}

impl Redactor {
    /// `line` with every secret replaced by `<redacted>`; borrowed when
    /// there is none, which is nearly always.
    pub fn redact<'a>(&self, line: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(line);
        for form in &self.forms {
            if out.contains(form.as_str()) {
                out = Cow::Owned(out.replace(form.as_str(), "<redacted>"));
            }
        }
        out
    }

    /// Makes this redactor apply to every log line the node writes, until
    /// it is dropped: libraries (rmcp, reqwest) log URLs and errors we
    /// never see.
    pub fn for_logs(self) -> Arc<Redactor> {
        let redactor = Arc::new(self);
        if !redactor.forms.is_empty() {
            let mut live = LOGGED.lock();
            live.retain(|weak| weak.strong_count() > 0);
            live.push(Arc::downgrade(&redactor));
        }
        redactor
    }
}

/// The redactors of every server this process knows, for its log writer.
static LOGGED: parking_lot::Mutex<Vec<Weak<Redactor>>> = parking_lot::Mutex::new(Vec::new());

/// `line` with the secrets of every live server replaced: the node's log
/// writer ([`spear_common::init_logging_redacted`]).
pub fn redact_logged(line: &str) -> String {
    let live = LOGGED.lock();
    let mut out = Cow::Borrowed(line);
    for redactor in live.iter().filter_map(Weak::upgrade) {
        if let Cow::Owned(redacted) = redactor.redact(&out) {
            out = Cow::Owned(redacted);
        }
    }
    out.into_owned()
}

/// `secret` as written, percent-encoded in full, and as the `url` crate
/// (so reqwest) writes it in a path and in a query.
fn url_forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    let encoded: String = secret
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    forms.push(encoded);
    if let Ok(mut url) = url::Url::parse("http://host/") {
        url.set_path(secret);
        forms.push(url.path().trim_start_matches('/').to_string());
        url.set_query(Some(secret));
        forms.extend(url.query().map(str::to_string));
    }
    forms.retain(|f| f.len() >= 4);
    forms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_follows_the_evaluation_table() {
        for (text, env, want) in spear_proto::refs::EVALUATION_TABLE {
            let lookup = |name: &str| -> Result<Option<String>, Refused> {
                Ok(env
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string()))
            };
            let got = Resolver::default().resolve("env.X", text, &lookup);
            match want {
                Ok(value) => assert_eq!(got, Ok(value.to_string()), "{text} with {env:?}"),
                Err(name) => assert_eq!(
                    got,
                    Err(ResolveError::Unset {
                        field: "env.X".into(),
                        name: name.to_string()
                    }),
                    "{text} with {env:?}"
                ),
            }
        }
    }

    fn env(name: &str) -> Result<Option<String>, Refused> {
        Ok(match name {
            "TOKEN" => Some("s3cr3t-value".into()),
            "EMPTY" => Some(String::new()),
            "OPENAI_API_KEY" => return Err(Refused("it is the node's own".into())),
            _ => None,
        })
    }

    #[test]
    fn a_servers_secrets_are_redacted_as_written_and_url_encoded() {
        let spec = ServerSpec {
            url: "http://h/${TOKEN}/mcp?k=${TOKEN}".into(),
            headers: [("X-Key".to_string(), "literal key 9".to_string())].into(),
            ..Default::default()
        };
        let redactor = Resolver::secrets_of(&spec, &env).redactor();
        let said = redactor.redact(
            "GET http://h/s3cr3t-value/mcp?k=s3cr3t-value failed; header literal%20key%209 or literal key 9",
        );
        assert!(
            !said.contains("s3cr3t") && !said.contains("literal"),
            "{said}"
        );
        assert_eq!(said.matches("<redacted>").count(), 4, "{said}");
    }
    #[test]
    fn references_resolve_with_defaults_and_escapes() {
        let mut r = Resolver::default();
        for (text, want) in [
            ("Bearer ${TOKEN}", "Bearer s3cr3t-value"),
            ("${MISSING:-fallback}", "fallback"),
            ("${EMPTY:-fallback}", "fallback"),
            ("$${TOKEN} costs $5", "${TOKEN} costs $5"),
        ] {
            assert_eq!(r.resolve("f", text, &env).unwrap(), want, "{text}");
        }
        assert_eq!(r.secrets, vec!["s3cr3t-value"]);
        assert_eq!(
            r.redactor().redact("auth failed for s3cr3t-value"),
            "auth failed for <redacted>"
        );
    }

    #[test]
    fn unset_references_name_the_variable_not_a_value() {
        let mut r = Resolver::default();
        let err = r.resolve("env.API_KEY", "${MISSING}", &env).unwrap_err();
        assert!(err.to_string().contains("MISSING") && err.to_string().contains("env.API_KEY"));
        assert!(matches!(
            r.resolve("args[0]", "${BROKEN", &env),
            Err(ResolveError::Malformed { .. })
        ));
        // The node refuses the names SMS's checker refuses.
        assert_eq!(
            r.resolve("args[1]", "${1BAD}", &env).unwrap_err().to_string(),
            "args[1] has a reference '${1BAD}' whose name is not a valid variable name (letters, digits and '_', not starting with a digit)"
        );
        // A refused variable is refused even with a default, saying why.
        let err = r
            .resolve("headers.Authorization", "${OPENAI_API_KEY:-x}", &env)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("does not let it read: it is the node's own"),
            "{err}"
        );
    }
}
