//! `applied.log`: one line per applied registry change, so anyone (the tests'
//! history checker, an SRE) can verify the node applied revisions in order,
//! with no gap and no duplicate.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use tracing::warn;

/// The log rotates to `applied.log.1` past this size.
const MAX_BYTES: u64 = 8 * 1024 * 1024;

/// An append-only log of applied changes. Write failures are logged, never fatal.
pub struct AppliedLog {
    path: PathBuf,
    file: Option<File>,
    size: u64,
}

impl AppliedLog {
    pub fn open(path: PathBuf) -> Self {
        let file = OpenOptions::new().create(true).append(true).open(&path);
        let (file, size) = match file {
            Ok(f) => {
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                (Some(f), size)
            }
            Err(error) => {
                warn!(path = %path.display(), %error, "cannot open the applied log");
                (None, 0)
            }
        };
        Self { path, file, size }
    }

    /// Appends one line and flushes it.
    pub fn append(&mut self, line: &str) {
        if self.size > MAX_BYTES {
            self.rotate();
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        match writeln!(file, "{line}").and_then(|()| file.flush()) {
            Ok(()) => self.size += line.len() as u64 + 1,
            Err(error) => {
                warn!(path = %self.path.display(), %error, "cannot write the applied log")
            }
        }
    }

    fn rotate(&mut self) {
        self.file = None;
        let _ = std::fs::rename(&self.path, self.path.with_extension("log.1"));
        *self = Self::open(self.path.clone());
    }
}
