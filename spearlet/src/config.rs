//! The node's TOML config file (`spearlet run --config`): what flags cannot
//! carry well, the LLM backends and guest capacity. Flags and environment
//! variables cover the rest. Unknown keys are errors.
//!
//! ```toml
//! [guests]
//! max_running = 256     # guest runs at once; more wait up to 10 s
//!
//! [llm.backends.openai]
//! kind = "openai"
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! api_key_env = "OPENAI_API_KEY"
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::llm::LlmSection;
use crate::wasm::POOL_SLOTS;

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFile {
    #[serde(default)]
    pub llm: LlmSection,
    #[serde(default)]
    pub guests: GuestSection,
}

/// `[guests]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestSection {
    #[serde(default = "default_max_running")]
    pub max_running: usize,
}

impl Default for GuestSection {
    fn default() -> Self {
        Self {
            max_running: default_max_running(),
        }
    }
}

fn default_max_running() -> usize {
    256
}

/// Why the config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the node config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the node config {path} is invalid: {message}")]
    Invalid { path: String, message: String },
}

impl NodeFile {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> Result<NodeFile, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text).map_err(|message| ConfigError::Invalid {
            path: shown,
            message,
        })
    }

    pub fn parse(text: &str) -> Result<NodeFile, String> {
        let file: NodeFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let max = POOL_SLOTS as usize;
        if file.guests.max_running == 0 || file.guests.max_running > max {
            return Err(format!(
                "guests.max_running is {}; use 1 to {max}",
                file.guests.max_running
            ));
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_and_bad_values_are_named() {
        assert!(NodeFile::parse("").is_ok());
        let error = NodeFile::parse("[guests]\nmax_runing = 3").unwrap_err();
        assert!(error.contains("max_runing"), "{error}");
        let error = NodeFile::parse("[guests]\nmax_running = 0").unwrap_err();
        assert!(error.contains("guests.max_running"), "{error}");
        let file = NodeFile::parse(
            "[llm.backends.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"llama\"\n",
        )
        .unwrap();
        assert_eq!(file.llm.backends.len(), 1);
    }
}
