//! The literal values of server files, sealed. Entry point: [`Sealer`].
//!
//! A server file may write a secret out (`"env": {"API_KEY": "sk-..."}`,
//! as Claude Desktop files do). SMS never puts such a value in the
//! registry: [`Sealer::seal`] moves every literal `env` and `headers` value
//! of a spec into its `sealed` list, sealed under SMS's key and bound to
//! the server, place and name, so the store, every watch stream and every
//! node's persisted registry hold only sealed bytes. A node that runs the
//! server asks SMS to open them ([`Sealer::open`], behind
//! `Credentials.OpenSealed`), which SMS does only for a node the server is
//! for, and only for the server's current values.
//!
//! The key is `--oauth-key-file` when given (every replica must have the
//! same one). An SMS that keeps its registry in memory and has no key file
//! seals with a key of its own that dies with it, as its registry does. An
//! SMS on etcd without a key cannot seal for its peers, so it refuses a
//! file with a literal value, saying how to fix it.
//!
//! References (`${NAME}`) are not sealed: they hold no secret, and the node
//! resolves them from its own environment under its policy.

use std::sync::Arc;

use spear_proto::refs::is_literal;
use spear_proto::v1::{SealedPlace, SealedValue, ServerSpec};

use crate::registry::Problem;
use crate::seal::SealingKey;

/// Why SMS does not open what a node sent.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("server '{server}' has no sealed value {place}.{name} like the one sent; the node's registry is behind SMS's, and will catch up")]
    NotCurrent {
        server: String,
        place: &'static str,
        name: String,
    },
    #[error("server '{0}''s sealed values do not open with this SMS's key; give every SMS replica the same --oauth-key-file")]
    WrongKey(String),
}

/// Seals literal values when files are read, opens them for nodes.
#[derive(Clone)]
pub struct Sealer {
    key: Option<Arc<SealingKey>>,
}

fn place_name(place: SealedPlace) -> &'static str {
    match place {
        SealedPlace::Header => "headers",
        SealedPlace::Env | SealedPlace::Unspecified => "env",
    }
}

/// What a value is bound to: its server, place and name.
fn owner(server: &str, place: SealedPlace, name: &str) -> String {
    format!("sealed-value\0{server}\0{}\0{name}", place_name(place))
}

impl Sealer {
    /// Sealing with `key`; `None` refuses literal values.
    pub fn new(key: Option<Arc<SealingKey>>) -> Self {
        Self { key }
    }

    /// Moves `spec`'s literal `env` and `headers` values into
    /// `spec.sealed`, sorted by place and name. Without a key, a literal
    /// value is a problem of `file`, named by its path, and `spec` is left
    /// as it was.
    pub fn seal(&self, file: &str, spec: &mut ServerSpec) -> Result<(), Vec<Problem>> {
        let mut literal: Vec<(SealedPlace, String)> = spec
            .env
            .iter()
            .filter(|(_, v)| is_literal(v))
            .map(|(k, _)| (SealedPlace::Env, k.clone()))
            .chain(
                spec.headers
                    .iter()
                    .filter(|(_, v)| is_literal(v))
                    .map(|(k, _)| (SealedPlace::Header, k.clone())),
            )
            .collect();
        if literal.is_empty() {
            return Ok(());
        }
        literal.sort();
        let Some(key) = &self.key else {
            return Err(literal
                .into_iter()
                .map(|(place, name)| {
                    let var = name.to_ascii_uppercase().replace('-', "_");
                    Problem {
                        file: file.to_string(),
                        path: format!("server '{}' {}.{name}", spec.id, place_name(place)),
                        message: format!("is a literal value, and this SMS has no key to seal it with (it shares etcd with its replicas); give every replica the same --oauth-key-file (`sms oauth keygen FILE`), or write \"${{{var}}}\" and set {var} on the nodes"),
                    }
                })
                .collect());
        };
        let mut sealed = Vec::with_capacity(literal.len());
        for (place, name) in literal {
            let map = match place {
                SealedPlace::Header => &mut spec.headers,
                _ => &mut spec.env,
            };
            let Some(value) = map.remove(&name) else {
                continue;
            };
            let bytes = key
                .seal_fixed(&owner(&spec.id, place, &name), value.as_bytes())
                .map_err(|_| {
                    vec![Problem {
                        file: file.to_string(),
                        path: format!("server '{}' {}.{name}", spec.id, place_name(place)),
                        message: "could not be sealed with SMS's key; check that --oauth-key-file holds a key made by `sms oauth keygen`"
                            .into(),
                    }]
                })?;
            sealed.push(SealedValue {
                place: place as i32,
                name,
                sealed: bytes.into(),
            });
        }
        spec.sealed = sealed;
        Ok(())
    }

    /// Opens `values`, which a node sent for `current` (the server's spec
    /// in SMS's registry): each must be one of its current sealed values.
    /// The caller has checked that the node may have them.
    pub fn open(
        &self,
        current: &ServerSpec,
        values: &[SealedValue],
    ) -> Result<Vec<String>, OpenError> {
        let key = self
            .key
            .as_ref()
            .ok_or_else(|| OpenError::WrongKey(current.id.clone()))?;
        values
            .iter()
            .map(|value| {
                let place = SealedPlace::try_from(value.place).unwrap_or(SealedPlace::Unspecified);
                if !current.sealed.contains(value) {
                    return Err(OpenError::NotCurrent {
                        server: current.id.clone(),
                        place: place_name(place),
                        name: value.name.clone(),
                    });
                }
                let plain = key
                    .open(&owner(&current.id, place, &value.name), &value.sealed)
                    .map_err(|_| OpenError::WrongKey(current.id.clone()))?;
                String::from_utf8(plain).map_err(|_| OpenError::WrongKey(current.id.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServerSpec {
        ServerSpec {
            id: "docs".into(),
            env: [
                ("API_KEY".to_string(), "sk-live-123".to_string()),
                ("HOME_DIR".to_string(), "${HOME}".to_string()),
            ]
            .into(),
            headers: [
                (
                    "Authorization".to_string(),
                    "Bearer abc-def-ghi".to_string(),
                ),
                ("X-Trace".to_string(), "on-${TRACE}".to_string()),
            ]
            .into(),
            ..Default::default()
        }
    }

    fn sealer() -> Sealer {
        Sealer::new(Some(Arc::new(SealingKey::ephemeral().unwrap())))
    }

    #[test]
    fn literal_values_leave_the_spec_and_references_stay() {
        let sealer = sealer();
        let mut sealed = spec();
        sealer.seal("docs.json", &mut sealed).unwrap();
        assert_eq!(sealed.env.keys().collect::<Vec<_>>(), ["HOME_DIR"]);
        assert_eq!(sealed.headers.keys().collect::<Vec<_>>(), ["X-Trace"]);
        let names: Vec<_> = sealed.sealed.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["API_KEY", "Authorization"]);
        let text = format!("{sealed:?}");
        assert!(
            !text.contains("sk-live-123") && !text.contains("abc-def-ghi"),
            "{text}"
        );

        // Sealed again, the spec is the same: the registry does not change.
        let mut again = spec();
        sealer.seal("docs.json", &mut again).unwrap();
        assert_eq!(again, sealed);

        let opened = sealer.open(&sealed, &sealed.sealed).unwrap();
        assert_eq!(opened, ["sk-live-123", "Bearer abc-def-ghi"]);
    }

    #[test]
    fn only_current_values_of_the_server_open() {
        let sealer = sealer();
        let mut docs = spec();
        sealer.seal("docs.json", &mut docs).unwrap();
        // Another server's value, sent as this one's: not current here.
        let mut other = spec();
        other.id = "other".into();
        sealer.seal("other.json", &mut other).unwrap();
        let error = sealer.open(&docs, &other.sealed[..1]).unwrap_err();
        assert!(matches!(error, OpenError::NotCurrent { .. }), "{error}");
        // A value that changed in the file since the node's registry.
        let mut changed = spec();
        changed.env.insert("API_KEY".into(), "sk-live-456".into());
        sealer.seal("docs.json", &mut changed).unwrap();
        assert!(sealer.open(&changed, &docs.sealed[..1]).is_err());
        // Another SMS's key.
        assert!(matches!(
            super::Sealer::new(Some(Arc::new(SealingKey::ephemeral().unwrap())))
                .open(&docs, &docs.sealed),
            Err(OpenError::WrongKey(_))
        ));
    }

    #[test]
    fn without_a_key_a_literal_value_is_a_problem_that_names_it_not_its_value() {
        let mut spec = spec();
        let problems = Sealer::new(None).seal("docs.json", &mut spec).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].contains("server 'docs' env.API_KEY") && text[0].contains("--oauth-key-file"),
            "{text:?}"
        );
        assert!(text
            .iter()
            .all(|t| !t.contains("sk-live") && !t.contains("abc-def")));
        assert_eq!(spec.env.len(), 2, "left as it was");
    }
}
