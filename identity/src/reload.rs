//! Files that are re-read when they change on disk: TLS material and the
//! admin token file. [`Watched::start`] reads them once (an error then is
//! a start-up error) and keeps checking; a change that reads well replaces
//! the value for every later use, one that does not is logged and the last
//! good value stays. Nothing already using the old value is disturbed: an
//! open TLS connection keeps the keys it was made with.
//!
//! Changes are found by polling each file's metadata (modification time,
//! size, inode), which also sees Kubernetes' symlink swaps of mounted
//! Secrets, where inotify on the file itself would not.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use tracing::{info, warn};

/// How often watched files are checked.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// A value read from files and kept current.
pub struct Watched<T> {
    current: Arc<ArcSwap<T>>,
}

impl<T> Clone for Watched<T> {
    fn clone(&self) -> Self {
        Self {
            current: Arc::clone(&self.current),
        }
    }
}

/// What identifies one version of the files: changes when any is
/// rewritten, replaced or re-linked.
fn fingerprint(paths: &[PathBuf]) -> Vec<Option<(i64, i64, u64, u64)>> {
    paths
        .iter()
        .map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.mtime(), m.mtime_nsec(), m.len(), m.ino()))
        })
        .collect()
}

impl<T: Send + Sync + 'static> Watched<T> {
    /// Reads the value with `load` and re-reads it whenever one of `paths`
    /// changes, until every handle is dropped. `what` names it in logs.
    /// Must be called inside a Tokio runtime.
    pub fn start<E, F>(what: &'static str, paths: Vec<PathBuf>, load: F) -> Result<Self, E>
    where
        E: std::fmt::Display,
        F: Fn() -> Result<T, E> + Send + 'static,
    {
        let mut seen = fingerprint(&paths);
        let current = Arc::new(ArcSwap::from_pointee(load()?));
        let weak: Weak<ArcSwap<T>> = Arc::downgrade(&current);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RELOAD_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(current) = weak.upgrade() else {
                    return;
                };
                let now = fingerprint(&paths);
                if now == seen {
                    continue;
                }
                seen = now;
                match load() {
                    Ok(value) => {
                        current.store(Arc::new(value));
                        info!("{what} changed on disk and was reloaded");
                    }
                    Err(error) => {
                        warn!("{what} changed on disk but cannot be used, so the previous one stays: {error}")
                    }
                }
            }
        });
        Ok(Self { current })
    }

    /// A value that never changes (tests, and values given directly).
    pub fn fixed(value: T) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(value)),
        }
    }

    /// The value as of now.
    pub fn get(&self) -> Arc<T> {
        self.current.load_full()
    }
}
