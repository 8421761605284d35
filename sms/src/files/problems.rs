//! What is wrong with the directory right now, for status and metrics.

use std::collections::{BTreeMap, BTreeSet};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use spear_proto::v1::FileProblem;

use crate::registry::Problem;

/// Problems per file and whether the directory itself could be read (files
/// skipped on purpose are not problems; `sms validate` lists them). Entries disappear as soon as the file is fixed or
/// removed.
#[derive(Debug, Default)]
pub struct FileProblems {
    inner: RwLock<Inner>,
    /// Whole scans of the directory so far (`sms_mcp_dir_scans`): a
    /// directory nobody touches is scanned once per rescan period.
    scans: AtomicU64,
    /// Bumped by every change: the console's live views follow it.
    version: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    by_file: BTreeMap<String, Vec<Problem>>,
    dir_error: Option<String>,
    /// A scan has read the directory and applied or rejected every file.
    loaded: bool,
}

impl FileProblems {
    /// Records `problems` for `file`; true when they differ from what was
    /// recorded (so the caller logs each problem once, not on every scan).
    pub fn set(&self, file: &str, problems: Vec<Problem>) -> bool {
        let mut inner = self.inner.write();
        if inner.by_file.get(file) == Some(&problems) {
            return false;
        }
        inner.by_file.insert(file.to_string(), problems);
        self.changed();
        true
    }

    /// Forgets the problems of `file`; true if it had any.
    pub fn clear(&self, file: &str) -> bool {
        let had = self.inner.write().by_file.remove(file).is_some();
        if had {
            self.changed();
        }
        had
    }

    fn changed(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    /// Changes whenever the problems do.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    pub fn has(&self, file: &str) -> bool {
        self.inner.read().by_file.contains_key(file)
    }

    /// Drops entries of files no longer in the directory.
    pub fn retain_files(&self, present: &BTreeSet<String>) {
        let mut inner = self.inner.write();
        let before = inner.by_file.len();
        inner.by_file.retain(|file, _| present.contains(file));
        if inner.by_file.len() != before {
            self.changed();
        }
    }

    /// Counts one whole scan of the directory.
    pub fn scanned(&self) {
        self.scans.fetch_add(1, Ordering::Relaxed);
    }

    /// Whole scans of the directory so far.
    pub fn scans(&self) -> u64 {
        self.scans.load(Ordering::Relaxed)
    }

    /// Notes that the directory has been loaded whole (SMS's readiness);
    /// it stays loaded, as the registry it gave stays served.
    pub fn mark_loaded(&self) {
        self.inner.write().loaded = true;
    }

    pub fn loaded(&self) -> bool {
        self.inner.read().loaded
    }

    pub fn set_dir_error(&self, error: Option<String>) {
        let mut inner = self.inner.write();
        if inner.dir_error != error {
            inner.dir_error = error;
            self.changed();
        }
    }

    /// Number of files currently rejected (plus one if the directory itself
    /// cannot be read).
    pub fn rejected_files(&self) -> usize {
        let inner = self.inner.read();
        inner.by_file.len() + usize::from(inner.dir_error.is_some())
    }

    /// Every problem, as the status API reports them.
    pub fn to_proto(&self) -> Vec<FileProblem> {
        let inner = self.inner.read();
        let mut out: Vec<FileProblem> = Vec::new();
        if let Some(error) = &inner.dir_error {
            out.push(FileProblem {
                file: String::new(),
                path: String::new(),
                message: error.clone(),
            });
        }
        out.extend(
            inner
                .by_file
                .values()
                .flatten()
                .cloned()
                .map(FileProblem::from),
        );
        out
    }
}
