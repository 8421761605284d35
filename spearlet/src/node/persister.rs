//! Writes the registry to the state dir after changes, batched, and once
//! more at shutdown, so a restarted node serves what it last applied.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::warn;

use crate::persist::StateDir;
use crate::registry::RegistryHandle;

/// Persist at most this often; the final state is always written.
const PERSIST_EVERY: Duration = Duration::from_millis(200);

/// Writes the registry to the state dir after changes, at most every
/// [`PERSIST_EVERY`], and once more at shutdown.
pub async fn run(
    state: StateDir,
    registry: RegistryHandle,
    on_disk: (u64, u64),
    mut shutdown: watch::Receiver<bool>,
) {
    let mut changes = registry.subscribe();
    let mut saved = on_disk;
    loop {
        // A change applied before this task subscribed is caught here too.
        if registry.current().position() != saved {
            changes.mark_changed();
        }
        let stop = tokio::select! {
            changed = changes.changed() => changed.is_err(),
            _ = shutdown.changed() => true,
        };
        if !stop {
            tokio::time::sleep(PERSIST_EVERY).await;
        }
        let view = registry.current();
        if view.position() != saved {
            let writer = state.clone();
            let snapshot = Arc::clone(&view);
            match tokio::task::spawn_blocking(move || writer.save_registry(&snapshot)).await {
                Ok(Ok(())) => saved = view.position(),
                Ok(Err(error)) => {
                    warn!(%error, "cannot persist the registry; will retry on the next change")
                }
                Err(error) => warn!(%error, "persisting the registry failed"),
            }
        }
        if stop {
            return;
        }
    }
}
