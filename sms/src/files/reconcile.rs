//! Turns the contents of `--mcp-dir` into registry changes, one atomic change
//! per changed file.
//!
//! A file that fails validation, or that claims an id another file or the
//! admin API owns, is rejected alone: its problems are recorded for status and
//! the last good version of its servers stays registered. A file's servers
//! leave the registry only when the file itself is gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use spear_proto::v1::{source, ServerRecord, ServerSpec, Source, VirtualServerSpec};
use tracing::{info, warn};

use super::problems::FileProblems;
use crate::registry::{scan_dir_since, FileOutcome, Problem};
use crate::sealed::Sealer;
use crate::store::{Change, Revision};
use crate::watch::{Hub, ServersView};
use crate::writer::{RegistryWriter, WriteError};

/// The source recorded for servers declared by `file`.
pub fn file_source(file: &str) -> Source {
    Source {
        kind: Some(source::Kind::File(file.to_string())),
    }
}

/// The file a record came from, if it came from a file.
pub fn record_file(record: &ServerRecord) -> Option<&str> {
    match record.source.as_ref().and_then(|s| s.kind.as_ref()) {
        Some(source::Kind::File(name)) => Some(name),
        _ => None,
    }
}

/// Keeps the registry equal to the directory, file by file.
pub struct Reconciler {
    dir: PathBuf,
    hub: Arc<Hub>,
    writer: Arc<RegistryWriter>,
    problems: Arc<FileProblems>,
    /// Takes literal values out of the specs before they are written.
    sealer: Sealer,
    /// Digest of each file as last applied (or last rejected for its content).
    applied: HashMap<String, [u8; 32]>,
}

impl Reconciler {
    pub fn new(
        dir: PathBuf,
        hub: Arc<Hub>,
        writer: Arc<RegistryWriter>,
        problems: Arc<FileProblems>,
        sealer: Sealer,
    ) -> Self {
        Self {
            dir,
            hub,
            writer,
            problems,
            sealer,
            applied: HashMap::new(),
        }
    }

    /// True while some file is rejected.
    pub fn has_rejected_files(&self) -> bool {
        self.problems.rejected_files() > 0
    }

    /// Scans the directory once and applies what changed.
    pub async fn reconcile(&mut self) {
        let (applied, problems) = (&self.applied, &self.problems);
        let known = |name: &str, digest: &[u8; 32]| {
            applied.get(name) == Some(digest) && !problems.has(name)
        };
        self.problems.scanned();
        let scan = match scan_dir_since(&self.dir, &known) {
            Ok(scan) => scan,
            Err(error) => {
                warn!(dir = %self.dir.display(), %error, "cannot read the MCP server directory; keeping the registry as it is");
                self.problems.set_dir_error(Some(format!(
                    "cannot read {}: {error}; check that it exists and SMS may read it",
                    self.dir.display()
                )));
                return;
            }
        };
        self.problems.set_dir_error(None);
        let present: BTreeSet<String> = scan.files.iter().map(|f| f.name.clone()).collect();
        // Files the store could not take this time.
        let mut pending = 0;
        for file in scan.files {
            if self.applied.get(&file.name) == Some(&file.digest) && !self.problems.has(&file.name)
            {
                continue;
            }
            match file.outcome {
                FileOutcome::Unchanged => continue,
                FileOutcome::Invalid(problems) => self.reject(&file.name, problems),
                FileOutcome::VirtualServer(spec) => {
                    if !self.virtual_server(&file.name, &spec).await {
                        pending += 1;
                        continue;
                    }
                }
                FileOutcome::Servers(mut specs) => {
                    let sealed: Vec<Problem> = specs
                        .iter_mut()
                        .filter_map(|spec| self.sealer.seal(&file.name, spec).err())
                        .flatten()
                        .collect();
                    if !sealed.is_empty() {
                        self.reject(&file.name, sealed);
                        self.applied.insert(file.name, file.digest);
                        continue;
                    }
                    let name = file.name.clone();
                    let result = self
                        .writer
                        .apply(|view| plan_file(&view, &name, &specs, &present))
                        .await;
                    match result {
                        Ok(revision) => self.accepted(&name, specs.len(), revision),
                        Err(WriteError::Rejected(problems)) => self.reject(&name, problems),
                        Err(WriteError::Store(error)) => {
                            warn!(file = %name, %error, "cannot apply file; will retry");
                            pending += 1;
                            continue;
                        }
                    }
                }
            }
            self.applied.insert(file.name, file.digest);
        }

        self.remove_vanished(&present).await;
        if pending == 0 {
            self.problems.mark_loaded();
        }
    }

    /// A valid virtual server file: checked like every file, so status
    /// shows its mistakes, and owning no server (one that declared servers
    /// before gives them up). This SMS has no northbound endpoint to serve
    /// it from yet. False when the store could not take the change.
    async fn virtual_server(&mut self, file: &str, spec: &VirtualServerSpec) -> bool {
        let result = self
            .writer
            .apply(|view| Ok::<_, ()>(plan_removal(&view, file)))
            .await;
        if let Err(error) = result {
            warn!(file, error = %error_text(&error), "cannot remove the servers of a file that became a virtual server; will retry");
            return false;
        }
        if self.problems.clear(file) {
            info!(file, "file is valid again");
        }
        warn!(file, virtual_server = %spec.name, offers = spec.offers.len(), "virtual server file is valid, but this SMS does not serve virtual servers yet (docs/virtual-servers.md)");
        true
    }

    /// Deletes the servers of files that are no longer in the directory.
    async fn remove_vanished(&mut self, present: &BTreeSet<String>) {
        self.applied.retain(|name, _| present.contains(name));
        self.problems.retain_files(present);
        let owners = self.owning_files();
        for gone in owners.difference(present) {
            let result = self
                .writer
                .apply(|view| Ok::<_, ()>(plan_removal(&view, gone)))
                .await;
            match result {
                Ok(revision) => {
                    info!(file = %gone, revision, "file removed; its servers left the registry")
                }
                Err(error) => {
                    warn!(file = %gone, error = %error_text(&error), "cannot remove the servers of a deleted file; will retry")
                }
            }
        }
    }

    /// Files that own at least one registered server.
    fn owning_files(&self) -> BTreeSet<String> {
        self.hub.with_servers(|_, _, view| {
            view.iter()
                .filter_map(record_file)
                .map(str::to_string)
                .collect()
        })
    }

    fn accepted(&self, file: &str, servers: usize, revision: Revision) {
        if self.problems.clear(file) {
            info!(file, "file is valid again");
        }
        info!(file, servers, revision, "file applied");
    }

    fn reject(&self, file: &str, problems: Vec<Problem>) {
        if self.problems.set(file, problems.clone()) {
            for problem in &problems {
                warn!(file, path = %problem.path, "rejected: {problem}; keeping the last good version of its servers");
            }
        }
    }
}

fn error_text<E>(error: &WriteError<E>) -> String {
    match error {
        WriteError::Rejected(_) => "rejected".to_string(),
        WriteError::Store(e) => e.to_string(),
    }
}

/// The change that makes the registry hold exactly `specs` for `file`, or the
/// problems that make the file unacceptable as a whole.
pub fn plan_file(
    view: &ServersView<'_>,
    file: &str,
    specs: &[ServerSpec],
    present: &BTreeSet<String>,
) -> Result<Change, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut change = Change::default();
    let source = file_source(file);
    let declared: BTreeMap<&str, &ServerSpec> = specs.iter().map(|s| (s.id.as_str(), s)).collect();
    for (id, spec) in &declared {
        if let Some(existing) = view.get(id) {
            let owner_problem = match record_file(existing) {
                Some(owner) if owner != file && present.contains(owner) => Some(format!(
                    "server id '{id}' is already declared in {owner}; ids must be unique across the directory, so rename one of them"
                )),
                None => Some(format!(
                    "server id '{id}' is registered through the admin API; delete it there or choose another id"
                )),
                _ => None,
            };
            if let Some(message) = owner_problem {
                problems.push(Problem {
                    file: file.to_string(),
                    path: String::new(),
                    message,
                });
                continue;
            }
            if existing.spec.as_ref() == Some(*spec) && existing.source.as_ref() == Some(&source) {
                continue;
            }
        }
        change.upserts.push(ServerRecord {
            spec: Some((*spec).clone()),
            source: Some(source.clone()),
            mod_revision: 0,
            // A new version of the file keeps the tools' pins: a changed
            // command that lists other tools is drift an operator approves.
            pins: view.get(id).and_then(|r| r.pins.clone()),
        });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    change.deletes = view
        .iter()
        .filter(|r| record_file(r) == Some(file))
        .filter_map(|r| r.spec.as_ref().map(|s| s.id.clone()))
        .filter(|id| !declared.contains_key(id.as_str()))
        .collect();
    Ok(change)
}

/// The change that removes every server `file` declared.
pub fn plan_removal(view: &ServersView<'_>, file: &str) -> Change {
    Change {
        upserts: Vec::new(),
        deletes: view
            .iter()
            .filter(|r| record_file(r) == Some(file))
            .filter_map(|r| r.spec.as_ref().map(|s| s.id.clone()))
            .collect(),
    }
}
