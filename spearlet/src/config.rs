//! The node's TOML config file (`spearlet run --config`): what flags cannot
//! carry well, the LLM backends, guest capacity and limits, and the node
//! policy ([`crate::node_policy`]). Flags and environment variables cover
//! the rest. Unknown keys are errors.
//!
//! ```toml
//! [guests]
//! max_running = 32      # guest runs at once; more wait up to 10 s
//! threads = 2           # guest threads (default: one per core)
//! fetch_timeout_ms = 30000
//! max_module_mb = 64
//!
//! [guests.limits]       # the most a task may ask for (and the default, where lower)
//! wall_ms = 60000
//! host_memory_mb = 16
//!
//! [llm.backends.openai]
//! kind = "openai"
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! api_key_env = "OPENAI_API_KEY"
//! ```

use std::path::Path;

use serde::Deserialize;

use spear_proto::task::TaskLimits;

use crate::llm::LlmSection;
use crate::node_policy::PolicySection;
use crate::wasm::POOL_SLOTS;

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFile {
    #[serde(default)]
    pub llm: LlmSection,
    #[serde(default)]
    pub guests: GuestSection,
    #[serde(default)]
    pub policy: PolicySection,
}

/// `[guests]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestSection {
    #[serde(default = "default_max_running")]
    pub max_running: usize,
    /// Threads guests run on (default: one per core).
    pub threads: Option<usize>,
    /// The whole fetch of a module over HTTP.
    #[serde(default = "default_fetch_timeout_ms")]
    pub fetch_timeout_ms: u64,
    /// Compiling one module.
    #[serde(default = "default_compile_timeout_ms")]
    pub compile_timeout_ms: u64,
    /// The largest module the node fetches.
    #[serde(default = "default_max_module_mb")]
    pub max_module_mb: u64,
    /// `[guests.limits]`: the most a task may ask for, with the keys (and
    /// the checks) of a task's `limits`; also the default where it is lower
    /// than the built-in one.
    #[serde(default)]
    pub limits: TaskLimits,
}

impl Default for GuestSection {
    fn default() -> Self {
        Self {
            max_running: default_max_running(),
            threads: None,
            fetch_timeout_ms: default_fetch_timeout_ms(),
            compile_timeout_ms: default_compile_timeout_ms(),
            max_module_mb: default_max_module_mb(),
            limits: TaskLimits::default(),
        }
    }
}

/// Defaults that fit a small node: 32 runs × (64 MiB guest memory + 16 MiB
/// host memory + 2 × 1 MiB output) is at most 2.6 GiB.
fn default_max_running() -> usize {
    32
}
fn default_fetch_timeout_ms() -> u64 {
    30_000
}
fn default_compile_timeout_ms() -> u64 {
    60_000
}
fn default_max_module_mb() -> u64 {
    64
}

/// Why the config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the node config {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("the node config {path} is invalid: {why}")]
    Invalid { path: String, why: Invalid },
}

/// What is wrong inside the node config.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("guests.max_running is {0}; use 1 to {max}", max = POOL_SLOTS)]
    MaxRunning(usize),
    #[error("guests.limits.{key} must be 1 to {max}")]
    Limit { key: &'static str, max: u64 },
    #[error("{0} is 0; give a positive value or leave it out")]
    Zero(&'static str),
}

impl NodeFile {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> Result<NodeFile, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: shown.clone(),
            cause,
        })?;
        Self::parse(&text).map_err(|why| ConfigError::Invalid { path: shown, why })
    }

    pub fn parse(text: &str) -> Result<NodeFile, Invalid> {
        let file: NodeFile = toml::from_str(text)?;
        let max = POOL_SLOTS as usize;
        if file.guests.max_running == 0 || file.guests.max_running > max {
            return Err(Invalid::MaxRunning(file.guests.max_running));
        }
        for (key, value, max) in file.guests.limits.entries() {
            if value.is_some_and(|v| v == 0 || v > max) {
                return Err(Invalid::Limit { key, max });
            }
        }
        let g = &file.guests;
        for (key, value) in [
            ("guests.threads", g.threads.map_or(1, |t| t as u64)),
            ("guests.fetch_timeout_ms", g.fetch_timeout_ms),
            ("guests.compile_timeout_ms", g.compile_timeout_ms),
            ("guests.max_module_mb", g.max_module_mb),
        ] {
            if value == 0 {
                return Err(Invalid::Zero(key));
            }
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
        assert!(error.to_string().contains("max_runing"), "{error}");
        let error = NodeFile::parse("[guests]\nmax_running = 0").unwrap_err();
        assert!(error.to_string().contains("guests.max_running"), "{error}");
        let file = NodeFile::parse(
            "[llm.backends.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"llama\"\n",
        )
        .unwrap();
        assert_eq!(file.llm.backends.len(), 1);
    }
}
