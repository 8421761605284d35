//! SIGHUP: the node reads its TOML again. Entry point: [`Reloader::reload`].
//!
//! A changed `[policy]` is checked like at start and, if acceptable, put in
//! force for every run and server connection from then on (runs in
//! progress keep the policy they started with). `[llm]` and `[guests]` size
//! and wire the guest runtime, so a change to them is reported and waits
//! for a restart. A file that no longer parses, or a policy that is not
//! acceptable, changes nothing: the node keeps the policy it had and says
//! why. TLS material needs no signal: it is re-read when the files change.

use std::path::PathBuf;

use parking_lot::Mutex;

use crate::config::{ConfigError, NodeFile};
use crate::llm::Backends;
use crate::node_policy::{NodePolicy, PolicyCell, PolicyError};

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the node was started without --config, so there is nothing to reload")]
    NoFile,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

/// What the node was started with, and the policy cell a reload replaces.
pub struct Reloader {
    path: Option<PathBuf>,
    state_dir: PathBuf,
    policy: PolicyCell,
    /// The file as last put in force.
    applied: Mutex<NodeFile>,
}

impl Reloader {
    pub fn new(
        path: Option<PathBuf>,
        state_dir: PathBuf,
        policy: PolicyCell,
        applied: NodeFile,
    ) -> Reloader {
        Reloader {
            path,
            state_dir,
            policy,
            applied: Mutex::new(applied),
        }
    }

    /// Reads the file again; a sentence saying what changed.
    pub fn reload(&self) -> Result<String, ReloadError> {
        let path = self.path.as_ref().ok_or(ReloadError::NoFile)?;
        let file = NodeFile::load(path)?;
        let policy =
            NodePolicy::build(&file.policy, &self.state_dir, Backends::key_vars(&file.llm))?;
        let mut applied = self.applied.lock();
        let mut said = Vec::new();
        if file.policy != applied.policy {
            self.policy.replace(policy);
            applied.policy = file.policy.clone();
            said.push("[policy] changed and is in force for new runs and connections".to_string());
        }
        // Debug forms compare what was written (names of key variables,
        // never their values).
        for (section, changed) in [
            (
                "[llm]",
                format!("{:?}", file.llm) != format!("{:?}", applied.llm),
            ),
            (
                "[guests]",
                format!("{:?}", file.guests) != format!("{:?}", applied.guests),
            ),
        ] {
            if changed {
                said.push(format!(
                    "{section} changed but takes effect only at a restart"
                ));
            }
        }
        if said.is_empty() {
            return Ok(format!("{}: unchanged", path.display()));
        }
        Ok(format!("{}: {}", path.display(), said.join("; ")))
    }
}
