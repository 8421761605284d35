//! Which sandbox a stdio server gets on this node (docs/security.md, "The
//! sandbox"; docs/decisions/0007-sandbox.md): the node's
//! `[policy.sandbox]` section and a server file's `"sandbox"` combined
//! into a [`spear_sandbox::Plan`], or the server running unconfined
//! where the node's policy lets it, or a refusal.
//!
//! Entry point: [`Sandboxing::decide`]. `grants.rs` computes what a
//! server may read and write; `forward.rs` carries its declared
//! destinations' connections out of its network namespace.

mod command;
mod forward;
mod grants;
pub mod packages;

use std::path::PathBuf;
use std::sync::Arc;

use spear_proto::patterns::glob_match;
use spear_proto::v1::ServerSpec;
use spear_sandbox::Plan;

use crate::node_policy::{Egress, SandboxSection};
pub use command::StdioCommand;
pub use forward::Forwarders;
pub use grants::own_paths;

/// How this process confines the servers it starts.
#[derive(Clone)]
pub struct Sandboxing {
    /// The binary that is the launcher: `spear-sandbox` beside this one,
    /// else this one (`spearlet sandbox-exec`), or why neither is found.
    pub launcher: Result<PathBuf, NoLauncher>,
    /// The node's state, config and keys: hidden in every sandbox.
    pub own_paths: Arc<Vec<PathBuf>>,
    /// The section in force (it follows policy reloads).
    pub section: Arc<dyn Fn() -> SandboxSection + Send + Sync>,
    /// Where declared destinations may be: the node's egress guard.
    /// `None` (`spearlet mcp`): wherever the names resolve.
    pub egress: Option<Egress>,
}

impl std::fmt::Debug for Sandboxing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxing")
            .field("launcher", &self.launcher)
            .finish_non_exhaustive()
    }
}

/// Why this process has no launcher to start servers with.
#[derive(Debug, Clone, thiserror::Error)]
#[error("this process cannot find its own binary to launch the sandbox ({0})")]
pub struct NoLauncher(Arc<std::io::Error>);

/// What a server gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// In its sandbox: this launcher, this plan.
    Confine { launcher: PathBuf, plan: Box<Plan> },
    /// Unconfined: its file says `"off"` and the node's policy allows it.
    Off,
    /// Not started: why, in one sentence.
    Refused(String),
}

impl Sandboxing {
    /// This binary as the launcher, the section from `section`.
    pub fn new(
        own_paths: Vec<PathBuf>,
        section: Arc<dyn Fn() -> SandboxSection + Send + Sync>,
        egress: Option<Egress>,
    ) -> Sandboxing {
        let launcher = std::env::current_exe()
            .map(|exe| spear_sandbox::launcher_beside(&exe))
            .map_err(|e| NoLauncher(Arc::new(e)));
        Sandboxing {
            launcher,
            own_paths: Arc::new(own_paths),
            section,
            egress,
        }
    }

    /// What the operator's commands (`spearlet mcp`, `spearlet explain`)
    /// start servers in: the node's default sandbox, hiding the node's
    /// state dir and the paths this command line names (not the server's
    /// own, after `--`).
    pub fn for_operator(state_dir: Option<&std::path::Path>) -> Sandboxing {
        let args: Vec<std::ffi::OsString> = std::env::args_os().take_while(|a| a != "--").collect();
        let own = own_paths(state_dir, None, &args);
        let section = SandboxSection::default();
        Sandboxing::new(own, Arc::new(move || section.clone()), None)
    }

    /// The command to run for `spec` (a package is installed apart from
    /// running it, when it will be confined) and its sandbox.
    pub async fn prepare(
        &self,
        spec: &ServerSpec,
        command: StdioCommand,
    ) -> (StdioCommand, Decision) {
        if spec.sandbox.as_ref().is_some_and(|s| s.off) {
            let decision = self.decide(spec, &command);
            return (command, decision);
        }
        match packages::fetched(&spec.id, command.clone()).await {
            Ok(fetched) => {
                let mut decision = self.decide(spec, &fetched.command);
                // The server's own copy of its package is its to write.
                if let (Decision::Confine { plan, .. }, Some(dir)) =
                    (&mut decision, fetched.package_dir)
                {
                    plan.write.push(dir);
                }
                (fetched.command, decision)
            }
            Err(why) => (command, Decision::Refused(why.to_string())),
        }
    }

    /// Decides `spec`'s sandbox for `command` (resolved on this node).
    pub fn decide(&self, spec: &ServerSpec, command: &StdioCommand) -> Decision {
        let section = (self.section)();
        let declared = spec.sandbox.clone().unwrap_or_default();
        if declared.off {
            if section.off.iter().any(|p| glob_match(p, &spec.id)) {
                return Decision::Off;
            }
            return Decision::Refused(format!(
                "its file says \"sandbox\": \"off\", and this node's policy does not let '{}' run unconfined (list it in [policy.sandbox] off, or remove \"off\"; `spearlet mcp` takes --no-sandbox)",
                spec.id
            ));
        }
        let launcher = match &self.launcher {
            Ok(launcher) => launcher.clone(),
            Err(why) => return Decision::Refused(why.to_string()),
        };
        match grants::plan(spec, command, &declared, &section, &self.own_paths) {
            Ok(plan) => Decision::Confine {
                launcher,
                plan: Box::new(plan),
            },
            Err(why) => Decision::Refused(why.to_string()),
        }
    }
}
