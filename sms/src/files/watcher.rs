//! Notices changes in `--mcp-dir` and asks the reconciler to rescan.
//!
//! Events only mark the directory dirty; the reconciler always rescans the
//! whole directory, so renames, write-to-temp-then-rename and editors' dances
//! all reduce to "the directory now looks like this". A short settle delay
//! groups the burst of events one save produces, and a slow periodic rescan
//! covers file systems whose change events are unreliable. While some file is
//! rejected, every registry change also triggers a rescan: an id freed by the
//! admin API or another file lets the rejected file in without waiting.

use std::path::Path;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::Reconciler;
use crate::store::{Epoch, Revision};

/// Time for a burst of events (one editor save) to settle.
const SETTLE: Duration = Duration::from_millis(50);
/// Rescan this often even without events.
const RESCAN_EVERY: Duration = Duration::from_secs(10);

/// Whether an event can mean the directory changed. Reading a file (open,
/// read, close without writing) cannot; and the rescan reads every file,
/// so counting reads would make each rescan start the next one.
fn may_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Applies the directory now, then keeps applying its changes until the
/// returned task is aborted. Fails only if the directory cannot be watched.
pub fn watch_dir(
    dir: &Path,
    mut reconciler: Reconciler,
    mut registry_changes: watch::Receiver<(Epoch, Revision)>,
) -> Result<JoinHandle<()>, notify::Error> {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match &event {
            Err(error) => warn!(%error, "directory watch error; a rescan will pick up changes"),
            Ok(event) if !may_change(&event.kind) => return,
            Ok(_) => {}
        }
        // A full channel already means "rescan"; nothing more to say.
        let _ = tx.try_send(());
    })?;
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    info!(dir = %dir.display(), "watching the MCP server directory");
    Ok(tokio::spawn(async move {
        // The watcher lives as long as this task.
        let _watcher = watcher;
        reconciler.reconcile().await;
        loop {
            tokio::select! {
                event = rx.recv() => {
                    if event.is_none() {
                        return;
                    }
                    tokio::time::sleep(SETTLE).await;
                    while rx.try_recv().is_ok() {}
                }
                _ = tokio::time::sleep(RESCAN_EVERY) => {}
                changed = registry_changes.changed() => {
                    if changed.is_err() {
                        // The hub is gone (shutting down); rely on events.
                        tokio::time::sleep(RESCAN_EVERY).await;
                    }
                    if !reconciler.has_rejected_files() {
                        continue;
                    }
                }
            }
            reconciler.reconcile().await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind, RenameMode};
    use notify::EventKind;

    use super::may_change;

    #[test]
    fn reading_a_file_is_no_change_and_everything_else_may_be() {
        let reads = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Any),
        ];
        for kind in reads {
            assert!(!may_change(&kind), "{kind:?}");
        }
        let changes = [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Any,
            EventKind::Other,
        ];
        for kind in changes {
            assert!(may_change(&kind), "{kind:?}");
        }
    }
}
