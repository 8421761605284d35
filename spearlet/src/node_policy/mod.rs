//! What a task or a server file may ask of this node (docs/tasks.md, "Node policy"): the
//! node's decision, in its own config (`[policy]` in the node TOML).
//!
//! ```toml
//! [policy]
//! env = ["FS_TOKEN", "GITHUB_*"]          # variables ${NAME} references may read
//! modules = ["https://", "file:///srv/spear/modules/"]   # where modules come from
//! egress = ["10.20.0.0/16"]               # non-public addresses MCP HTTP servers
//!                                          # and module fetches may reach
//!
//! [[policy.dirs]]
//! path = "/srv/data"                       # may be granted to tasks
//! writable = false
//! ```
//!
//! Deny by default: no directory, no variable, modules over `https` only,
//! no loopback, private, link-local or metadata address ([`egress`]).
//! Some things are never allowed whatever the file says: the node's own
//! variables ([`env::EnvPolicy`]), and the state dir, `/proc`, `/sys` and
//! `/dev` as directories ([`dirs::DirPolicy`]). [`NodePolicy::build`] checks
//! the section once at start; each refusal names the key it refuses and the
//! setting that refused it.

mod dirs;
pub mod egress;
mod env;
mod modules;
mod sandbox;

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;

pub use dirs::{DirPolicy, DirRefused, DirRule, GrantedDir};
pub use egress::{Egress, EgressPolicy, EgressRefused};
pub use env::{EnvPolicy, Refused};
pub use modules::{ModulePolicy, ModuleRefused, ModuleSource};
pub use sandbox::{SandboxSection, OPTIONAL_FEATURES};

/// The `[policy]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// Host directories tasks may be granted.
    #[serde(default)]
    pub dirs: Vec<DirRule>,
    /// Variable names, or prefixes ending in `*`, that `${NAME}` references
    /// in task `wasi.env` and in server files may read.
    #[serde(default)]
    pub env: Vec<String>,
    /// Where modules may be fetched from: URI prefixes (`https://`,
    /// `https://host/path/`, `http://127.0.0.1:*/`, `file:///dir/`).
    pub modules: Option<Vec<String>>,
    /// Non-public addresses (loopback, private, link-local, metadata, ...)
    /// MCP HTTP servers and module fetches may reach: ranges such as
    /// `10.0.0.0/8` or single addresses. Public addresses need no entry.
    #[serde(default)]
    pub egress: Vec<String>,
    /// How stdio MCP servers are confined (`[policy.sandbox]`).
    #[serde(default)]
    pub sandbox: SandboxSection,
}

/// A policy setting that is itself unacceptable.
#[derive(Debug, thiserror::Error)]
#[error("policy.{setting}: {why}")]
pub struct PolicyError {
    pub setting: String,
    pub why: String,
}

/// The checked policy.
#[derive(Debug, Clone)]
pub struct NodePolicy {
    pub dirs: DirPolicy,
    pub env: EnvPolicy,
    pub modules: ModulePolicy,
    pub egress: Arc<EgressPolicy>,
    pub sandbox: SandboxSection,
}

impl NodePolicy {
    /// Checks `section` for a node whose state dir is `state_dir` and whose
    /// own variables (LLM keys, settings) are `own_vars`.
    pub fn build(
        section: &PolicySection,
        state_dir: &Path,
        own_vars: Vec<String>,
    ) -> Result<NodePolicy, PolicyError> {
        let dirs = DirPolicy::build(&section.dirs, state_dir)?;
        let modules = ModulePolicy::build(section.modules.as_deref())?;
        // A module root over the state dir would read the node's own files
        // (its compiled modules, their key) as modules.
        if let Some(root) = modules
            .file_roots()
            .find(|root| dirs.is_never_grantable(root))
        {
            return Err(PolicyError {
                setting: "modules".into(),
                why: format!(
                    "file://{}/ overlaps the state dir, /proc, /sys or /dev; name a directory of modules",
                    root.display()
                ),
            });
        }
        section.sandbox.check().map_err(|why| PolicyError {
            setting: "sandbox".into(),
            why: why.to_string(),
        })?;
        Ok(NodePolicy {
            sandbox: section.sandbox.clone(),
            dirs,
            env: EnvPolicy::build(&section.env, own_vars)?,
            modules,
            egress: Arc::new(
                EgressPolicy::build(&section.egress).map_err(|why| PolicyError {
                    setting: "egress".into(),
                    why: why.to_string(),
                })?,
            ),
        })
    }

    /// Nothing granted, modules over https only: for tools and tests.
    pub fn deny_all(state_dir: &Path) -> NodePolicy {
        NodePolicy {
            dirs: DirPolicy::none(state_dir),
            env: EnvPolicy::none(),
            modules: ModulePolicy::default(),
            egress: Arc::default(),
            sandbox: SandboxSection::default(),
        }
    }
}

/// The node's policy as it stands: read by every run and every server
/// connection, replaced whole when the node reloads its TOML (SIGHUP).
/// A reader takes the current policy once and decides with it, so one run
/// never sees half of an old policy and half of a new one.
#[derive(Debug, Clone)]
pub struct PolicyCell(Arc<ArcSwap<NodePolicy>>);

impl PolicyCell {
    pub fn new(policy: NodePolicy) -> PolicyCell {
        PolicyCell(Arc::new(ArcSwap::from_pointee(policy)))
    }

    /// The policy in force now.
    pub fn current(&self) -> Arc<NodePolicy> {
        self.0.load_full()
    }

    /// Puts `policy` in force for what is decided from now on.
    pub fn replace(&self, policy: NodePolicy) {
        self.0.store(Arc::new(policy));
    }

    /// The sandbox section in force, following reloads.
    pub fn sandbox(&self) -> std::sync::Arc<dyn Fn() -> SandboxSection + Send + Sync> {
        let cell = self.clone();
        std::sync::Arc::new(move || cell.current().sandbox.clone())
    }

    /// The egress guard following this policy as it is reloaded.
    pub fn egress(&self) -> Egress {
        let cell = self.clone();
        Egress::new(move || Arc::clone(&cell.current().egress))
    }
}
