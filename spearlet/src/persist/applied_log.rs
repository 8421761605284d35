//! `applied.log`: one line per applied registry change, so anyone (the tests'
//! history checker, an SRE) can verify the node applied revisions in order,
//! with no gap and no duplicate.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;

use tracing::warn;

/// One applied change: a line of `applied.log` (`snapshot EPOCH REV`,
/// `delta EPOCH PREV REV`, or `restored EPOCH REV` when a starting node
/// takes up the registry it persisted, which may be older than the last
/// line if it crashed before persisting). The node writes it with `Display`; readers
/// (the tests' history checker, an SRE's script) parse it with `FromStr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Snapshot {
        epoch: u64,
        revision: u64,
    },
    Delta {
        epoch: u64,
        prev: u64,
        revision: u64,
    },
    Restored {
        epoch: u64,
        revision: u64,
    },
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Applied::Snapshot { epoch, revision } => write!(f, "snapshot {epoch} {revision}"),
            Applied::Delta {
                epoch,
                prev,
                revision,
            } => write!(f, "delta {epoch} {prev} {revision}"),
            Applied::Restored { epoch, revision } => write!(f, "restored {epoch} {revision}"),
        }
    }
}

/// A line that is not an [`Applied`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an applied.log line: {0:?}")]
pub struct BadLine(pub String);

impl FromStr for Applied {
    type Err = BadLine;

    fn from_str(line: &str) -> Result<Applied, BadLine> {
        let bad = || BadLine(line.chars().take(200).collect());
        let parts: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<u64, BadLine> {
            parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(bad)
        };
        match (parts.first(), parts.len()) {
            (Some(&"snapshot"), 3) => Ok(Applied::Snapshot {
                epoch: num(1)?,
                revision: num(2)?,
            }),
            (Some(&"restored"), 3) => Ok(Applied::Restored {
                epoch: num(1)?,
                revision: num(2)?,
            }),
            (Some(&"delta"), 4) => Ok(Applied::Delta {
                epoch: num(1)?,
                prev: num(2)?,
                revision: num(3)?,
            }),
            _ => Err(bad()),
        }
    }
}

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

    /// Appends one change and flushes it.
    pub fn append(&mut self, applied: &Applied) {
        let line = applied.to_string();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_bad_lines_are_named() {
        for applied in [
            Applied::Snapshot {
                epoch: 7,
                revision: 12,
            },
            Applied::Delta {
                epoch: 7,
                prev: 12,
                revision: 15,
            },
            Applied::Restored {
                epoch: 7,
                revision: 12,
            },
        ] {
            assert_eq!(applied.to_string().parse::<Applied>(), Ok(applied));
        }
        for bad in [
            "",
            "snapshot 1",
            "delta 1 2",
            "delta 1 2 x",
            "snapshot 1 2 3",
            "other 1 2",
        ] {
            assert!(bad.parse::<Applied>().is_err(), "{bad}");
        }
    }
}
