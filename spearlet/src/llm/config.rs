//! The node's LLM backends, as the operator declares them in the node's TOML
//! config. API keys are never written in the file: a backend names the
//! environment variable that holds its key, read once at start.
//!
//! ```toml
//! [llm]
//! default = "openai"
//!
//! [llm.backends.openai]
//! kind = "openai"                       # OpenAI-compatible chat completions
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! api_key_env = "OPENAI_API_KEY"
//!
//! [llm.backends.claude]
//! kind = "anthropic"
//! base_url = "https://api.anthropic.com"
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"
//! stream = true
//!
//! [llm.backends.claude-search]
//! kind = "anthropic"
//! base_url = "https://api.anthropic.com"
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"
//! tool_search = "native"                # Anthropic's own search when a session searches
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;

use super::{AnthropicBackend, AnthropicConfig, LlmBackend, OpenAiBackend, OpenAiConfig};

/// The `[llm]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSection {
    /// The backend a task uses when it names none.
    pub default: Option<String>,
    #[serde(default)]
    pub backends: BTreeMap<String, BackendSection>,
    /// What each model costs, in USD per million tokens (docs/usage.md).
    #[serde(default)]
    pub prices: BTreeMap<String, super::PriceSection>,
}

/// Which wire format a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Openai,
    Anthropic,
}

/// One `[llm.backends.<name>]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSection {
    pub kind: BackendKind,
    pub base_url: String,
    pub model: String,
    /// Other models tasks may pick with `llm.model` (the node policy for
    /// models: none beyond `model` unless listed).
    #[serde(default)]
    pub models: Vec<String>,
    /// The environment variable holding the API key; none for local servers.
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// Anthropic requires it; ignored for OpenAI-compatible backends.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// How a session's tool search (`mcp.tool_search`) is done on this
    /// backend: by the node (the default, every provider) or by the
    /// provider (`"native"`: Anthropic's deferred loading).
    #[serde(default)]
    pub tool_search: ToolSearchBy,
}

/// `tool_search` of a backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSearchBy {
    /// The node's search tool, `mcp_search_tools`.
    #[default]
    Node,
    /// Anthropic's server-side tool search: every tool the session may use
    /// is sent with `defer_loading`, and the provider searches them.
    Native,
}

fn default_timeout() -> u64 {
    120
}
fn default_retries() -> u32 {
    3
}
fn default_max_tokens() -> u32 {
    4096
}

/// A backend as configured, with its key resolved.
#[derive(Clone)]
struct Resolved {
    section: BackendSection,
    api_key: Option<String>,
}

/// Why the node's backends could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("llm backend '{name}': {why}")]
    Invalid { name: String, why: String },
    #[error(transparent)]
    Price(#[from] super::BadPrice),
    #[error("llm.default names '{0}', which is not under [llm.backends]")]
    UnknownDefault(String),
    #[error("the task asks for LLM backend '{name}', which this node does not configure (its backends: {configured})")]
    Unknown { name: String, configured: String },
    #[error("the task names no LLM backend and this node has no llm.default; set one in the node's config")]
    NoDefault,
    #[error("the task asks for model '{model}' on backend '{backend}', which this node does not offer (llm.backends.{backend}.models lists the models tasks may pick besides '{default}')")]
    ModelNotOffered {
        backend: String,
        model: String,
        default: String,
    },
}

/// The node's backends, built on demand per (backend, model) and shared.
pub struct Backends {
    default: Option<String>,
    prices: Arc<super::Prices>,
    configured: BTreeMap<String, Resolved>,
    built: Mutex<HashMap<(String, String), Arc<dyn LlmBackend>>>,
}

impl Backends {
    /// Checks every backend and reads its key from `env`.
    pub fn new(
        section: LlmSection,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Backends, BackendError> {
        let prices = Arc::new(super::Prices::from_sections(&section.prices)?);
        let mut configured = BTreeMap::new();
        for (name, backend) in section.backends {
            let invalid = |why: String| BackendError::Invalid {
                name: name.clone(),
                why,
            };
            if !(backend.base_url.starts_with("http://")
                || backend.base_url.starts_with("https://"))
            {
                return Err(invalid(format!(
                    "base_url '{}' must start with http:// or https://",
                    backend.base_url
                )));
            }
            if backend.model.is_empty() {
                return Err(invalid("model is empty".into()));
            }
            if backend.tool_search == ToolSearchBy::Native {
                if backend.kind != BackendKind::Anthropic {
                    return Err(invalid("tool_search = \"native\" is Anthropic's; an OpenAI-compatible backend searches with the node's tool (remove tool_search)".into()));
                }
            }
            let api_key = match &backend.api_key_env {
                Some(var) => Some(env(var).filter(|v| !v.is_empty()).ok_or_else(|| {
                    invalid(format!(
                        "the environment variable {var} (api_key_env) is not set on this node"
                    ))
                })?),
                None => None,
            };
            configured.insert(
                name,
                Resolved {
                    section: backend,
                    api_key,
                },
            );
        }
        // With one backend, it is the default.
        let default = section.default.or_else(|| {
            (configured.len() == 1)
                .then(|| configured.keys().next().cloned())
                .flatten()
        });
        if let Some(name) = &default {
            if !configured.contains_key(name) {
                return Err(BackendError::UnknownDefault(name.clone()));
            }
        }
        Ok(Backends {
            default,
            prices,
            configured,
            built: Mutex::new(HashMap::new()),
        })
    }

    /// The node's price table.
    pub fn prices(&self) -> Arc<super::Prices> {
        Arc::clone(&self.prices)
    }

    /// The variables holding the backends' keys: never readable by a
    /// task's or a server file's references.
    pub fn key_vars(section: &LlmSection) -> Vec<String> {
        section
            .backends
            .values()
            .filter_map(|b| b.api_key_env.clone())
            .collect()
    }

    /// Backend names, for status output.
    pub fn names(&self) -> Vec<String> {
        self.configured.keys().cloned().collect()
    }

    /// The backend a name stands for: `name`, or the node's default.
    pub fn resolve_name<'a>(&'a self, name: Option<&'a str>) -> Option<&'a str> {
        name.filter(|n| !n.is_empty()).or(self.default.as_deref())
    }

    /// The model `name` asks when none is named.
    pub fn default_model(&self, name: &str) -> Option<&str> {
        self.configured.get(name).map(|b| b.section.model.as_str())
    }

    /// The backend a task asked for (or the default), with its model
    /// replaced when the task names one.
    pub fn get(
        &self,
        name: Option<&str>,
        model: Option<&str>,
    ) -> Result<Arc<dyn LlmBackend>, BackendError> {
        let name = match name.filter(|n| !n.is_empty()).or(self.default.as_deref()) {
            Some(name) => name,
            // A node without backends still runs guests that never ask the
            // model; the ones that do are told why in their reply.
            None if self.configured.is_empty() => return Ok(Arc::new(NoBackend)),
            None => return Err(BackendError::NoDefault),
        };
        let resolved = self
            .configured
            .get(name)
            .ok_or_else(|| BackendError::Unknown {
                name: name.to_string(),
                configured: self.names().join(", "),
            })?;
        let offered = &resolved.section;
        let model = match model.filter(|m| !m.is_empty()) {
            Some(m) if m == offered.model || offered.models.iter().any(|o| o == m) => m,
            Some(m) => {
                return Err(BackendError::ModelNotOffered {
                    backend: name.to_string(),
                    model: m.to_string(),
                    default: offered.model.clone(),
                })
            }
            None => offered.model.as_str(),
        }
        .to_string();
        let key = (name.to_string(), model.clone());
        let mut built = self.built.lock();
        if let Some(backend) = built.get(&key) {
            return Ok(Arc::clone(backend));
        }
        let s = &resolved.section;
        let backend: Arc<dyn LlmBackend> = match s.kind {
            BackendKind::Openai => Arc::new(OpenAiBackend::new(OpenAiConfig {
                base_url: s.base_url.clone(),
                model,
                api_key: resolved.api_key.clone(),
                timeout: Duration::from_secs(s.timeout_secs),
                max_retries: s.max_retries,
                stream: s.stream,
            })),
            BackendKind::Anthropic => Arc::new(AnthropicBackend::new(AnthropicConfig {
                base_url: s.base_url.clone(),
                model,
                api_key: resolved.api_key.clone(),
                max_tokens: s.max_tokens,
                timeout: Duration::from_secs(s.timeout_secs),
                max_retries: s.max_retries,
                stream: s.stream,
                native_tool_search: s.tool_search == ToolSearchBy::Native,
            })),
        };
        built.insert(key, Arc::clone(&backend));
        Ok(backend)
    }
}

/// What a guest talks to on a node without backends.
struct NoBackend;

#[async_trait::async_trait]
impl LlmBackend for NoBackend {
    async fn complete(
        &self,
        _request: super::ChatRequest<'_>,
    ) -> Result<super::Reply, super::LlmError> {
        Err(super::LlmError::NotConfigured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `result` was refused with (backends are not `Debug`, so no
    /// `unwrap_err`).
    fn refusal<T, E: std::fmt::Display>(result: Result<T, E>) -> String {
        match result {
            Ok(_) => panic!("expected a refusal"),
            Err(e) => e.to_string(),
        }
    }

    fn section(toml_text: &str) -> LlmSection {
        #[derive(Deserialize)]
        struct File {
            llm: LlmSection,
        }
        toml::from_str::<File>(toml_text).unwrap().llm
    }

    #[test]
    fn keys_come_from_the_environment_and_mistakes_are_named() {
        let text = r#"
            [llm.backends.openai]
            kind = "openai"
            base_url = "http://127.0.0.1:1/v1"
            model = "m"
            api_key_env = "TEST_KEY"
        "#;
        let backends = Backends::new(section(text), |_| Some("k".into())).unwrap();
        assert!(
            backends.get(None, None).is_ok(),
            "a single backend is the default"
        );
        // Only the models the node offers (docs/tasks.md, "Node policy").
        let refused = refusal(backends.get(Some("openai"), Some("other-model")));
        assert!(refused.contains("llm.backends.openai.models"), "{refused}");
        assert!(backends.get(Some("openai"), Some("m")).is_ok());
        let offered = section(&format!("{text}\nmodels = [\"other-model\"]"));
        let backends_with = Backends::new(offered, |_| Some("k".into())).unwrap();
        assert!(backends_with
            .get(Some("openai"), Some("other-model"))
            .is_ok());
        let error = refusal(backends.get(Some("claude"), None));
        assert!(
            error.contains("'claude'") && error.contains("openai"),
            "{error}"
        );

        let error = refusal(Backends::new(section(text), |_| None));
        assert!(
            error.contains("TEST_KEY") && error.contains("not set"),
            "{error}"
        );

        let error = refusal(Backends::new(
            section(&text.replace("http://", "ftp://")),
            |_| None,
        ));
        assert!(error.contains("base_url"), "{error}");
        // No backends at all: guests run, and a send says why it cannot.
        let none = Backends::new(LlmSection::default(), |_| None).unwrap();
        let backend = none.get(None, None).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let error = runtime
            .block_on(backend.complete(crate::llm::ChatRequest::plain(&[], &[])))
            .err()
            .unwrap();
        assert!(error.to_string().contains("no LLM backend"), "{error}");
        assert!(
            none.get(Some("openai"), None).is_err(),
            "a named backend must exist"
        );

        let bad =
            toml::from_str::<toml::Value>(&text.replace("kind = \"openai\"", "kind = \"gemini\""))
                .unwrap();
        assert!(LlmSection::deserialize(bad["llm"].clone()).is_err());
    }

    #[test]
    fn native_tool_search_is_anthropic_s() {
        let claude = r#"
            [llm.backends.claude]
            kind = "anthropic"
            base_url = "http://127.0.0.1:1"
            model = "m"
            tool_search = "native"
        "#;
        let backends = Backends::new(section(claude), |_| None).unwrap();
        assert!(backends.get(None, None).unwrap().searches_natively());
        let plain = Backends::new(
            section(&claude.replace("tool_search = \"native\"", "")),
            |_| None,
        )
        .unwrap();
        assert!(!plain.get(None, None).unwrap().searches_natively());
        let streaming =
            Backends::new(section(&format!("{claude}\nstream = true")), |_| None).unwrap();
        assert!(streaming.get(None, None).unwrap().searches_natively());
        let openai = claude.replace("anthropic", "openai");
        let error = refusal(Backends::new(section(&openai), |_| None));
        assert!(
            error.contains("claude") && error.contains("Anthropic's"),
            "{error}"
        );
    }
}
