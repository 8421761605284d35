//! `spearlet guest`: an agent author's loop without a cluster
//! (docs/guest-guide.md, "Without a cluster"): [`build`] turns a source
//! in any of the SDKs' languages into a module or component, [`run`] runs
//! one once as a node would.

mod build;
mod replay;
mod run;

use std::path::PathBuf;

use clap::Subcommand;

pub use run::RunArgs;

/// `spearlet guest …`.
#[derive(Debug, Subcommand)]
pub enum GuestCommand {
    /// Build an agent: SOURCE is a .py, .js, .ts or .c file or a Cargo
    /// project; the toolchain is picked from it (scripts/setup.sh installs
    /// them).
    Build {
        source: PathBuf,
        /// The module or component to write.
        #[arg(short, long)]
        out: PathBuf,
    },
    /// Run a built agent once, as a node would (its sandbox, limits and
    /// policy, the servers of --mcp-dir in their sandboxes), against the
    /// model in OPENAI_BASE_URL or a recorded replay; prints the answer,
    /// the tool calls and the stop reason.
    Run(Box<RunArgs>),
}

/// Runs the subcommand; returns the exit code.
pub async fn run(command: GuestCommand) -> anyhow::Result<i32> {
    match command {
        GuestCommand::Build { source, out } => {
            build::build(&source, &out)?;
            Ok(0)
        }
        GuestCommand::Run(args) => run::run(*args).await,
    }
}
