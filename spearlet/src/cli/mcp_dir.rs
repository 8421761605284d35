//! A directory of server files read as SMS reads it
//! (`spear-server-files`), for the commands that work without SMS:
//! `spearlet guest run` and `spearlet mcp serve`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use spear_common::safe_eprintln;
use spear_proto::v1::{ServerSpec, VirtualServerSpec};
use spear_server_files::FileOutcome;

/// What the directory declares.
#[derive(Debug, Default)]
pub struct Declared {
    pub servers: Vec<ServerSpec>,
    pub virtual_servers: Vec<VirtualServerSpec>,
}

/// The declarations of `dir`; a file SMS would refuse stops the command
/// with its problems.
pub fn read(dir: &Path) -> Result<Declared> {
    let scan = spear_server_files::scan_dir(dir)
        .with_context(|| format!("--mcp-dir {}", dir.display()))?;
    let mut declared = Declared::default();
    let mut problems = Vec::new();
    for file in scan.files {
        match file.outcome {
            FileOutcome::Servers(found) => declared.servers.extend(found),
            FileOutcome::VirtualServer(spec) => declared.virtual_servers.push(spec),
            FileOutcome::Invalid(found) => {
                problems.extend(found.into_iter().map(|p| p.to_string()))
            }
            FileOutcome::Unchanged => {}
        }
    }
    if !problems.is_empty() {
        for problem in &problems {
            safe_eprintln!("{problem}");
        }
        bail!(
            "{} holds files SMS would refuse (above); fix them first",
            dir.display()
        );
    }
    Ok(declared)
}
