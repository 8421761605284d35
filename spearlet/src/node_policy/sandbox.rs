//! `[policy.sandbox]`: how the stdio servers this node starts are
//! confined (the node's half; a server file's `"sandbox"` is the other,
//! combined in the sandbox module).

use serde::Deserialize;
use spear_sandbox::Required;

/// `[policy.sandbox]` in the node TOML.
///
/// ```toml
/// [policy.sandbox]
/// off = ["legacy-*"]         # servers whose file may say "sandbox": "off"
/// accept_less = []           # "landlock", "seccomp": start without them
/// memory_mb = 1024           # defaults a server file may change
/// processes = 128
/// scratch_mb = 256
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    #[serde(default)]
    pub off: Vec<String>,
    #[serde(default)]
    pub accept_less: Vec<String>,
    #[serde(default = "default_memory")]
    pub memory_mb: u64,
    #[serde(default = "default_processes")]
    pub processes: u64,
    #[serde(default = "default_scratch")]
    pub scratch_mb: u64,
}

fn default_memory() -> u64 {
    1024
}
fn default_processes() -> u64 {
    128
}
fn default_scratch() -> u64 {
    256
}

impl Default for SandboxSection {
    fn default() -> Self {
        SandboxSection {
            off: Vec::new(),
            accept_less: Vec::new(),
            memory_mb: default_memory(),
            processes: default_processes(),
            scratch_mb: default_scratch(),
        }
    }
}

/// Features `accept_less` may name.
pub const OPTIONAL_FEATURES: &[&str] = &["landlock", "seccomp"];

/// Why `[policy.sandbox]` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSandboxSection {
    #[error("accept_less: '{0}' is not a feature a server can start without; use {features}", features = OPTIONAL_FEATURES.join(" or "))]
    Feature(String),
    #[error("{name}: {value} is below {min}")]
    Below {
        name: &'static str,
        value: u64,
        min: u64,
    },
}

impl SandboxSection {
    /// Checks the section once, at start and reload.
    pub fn check(&self) -> Result<(), BadSandboxSection> {
        if let Some(bad) = self
            .accept_less
            .iter()
            .find(|f| !OPTIONAL_FEATURES.contains(&f.as_str()))
        {
            return Err(BadSandboxSection::Feature(bad.clone()));
        }
        for (name, value, min) in [
            ("memory_mb", self.memory_mb, 16),
            ("processes", self.processes, 1),
            ("scratch_mb", self.scratch_mb, 1),
        ] {
            if value < min {
                return Err(BadSandboxSection::Below { name, value, min });
            }
        }
        Ok(())
    }

    pub fn required(&self) -> Required {
        Required {
            landlock: !self.accept_less.iter().any(|f| f == "landlock"),
            seccomp: !self.accept_less.iter().any(|f| f == "seccomp"),
        }
    }
}
