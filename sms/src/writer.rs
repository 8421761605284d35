//! The one way to change the registry: plan a change against the hub's
//! current view, commit it on top of that revision, and retry on conflict.
//!
//! Writers (the directory reconciler and the admin API) are serialised inside
//! one SMS; across SMS replicas the store's compare-and-swap does it. A write
//! returns only once the hub has applied it, so a caller that reads right
//! after sees its own change.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::store::{Change, Revision, StoreError};
use crate::watch::{Hub, ServersView};

/// A writer gives up after this many conflicting attempts in a row.
const MAX_ATTEMPTS: usize = 32;
/// How long a write waits for the hub to see its own revision.
const VISIBILITY_WAIT: Duration = Duration::from_secs(10);

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E> {
    /// The planner refused the change (a validation or ownership problem).
    #[error("{0}")]
    Rejected(E),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Serialises registry writes and applies them through the store.
pub struct RegistryWriter {
    hub: Arc<Hub>,
    lock: Mutex<()>,
}

impl RegistryWriter {
    pub fn new(hub: Arc<Hub>) -> Self {
        Self {
            hub,
            lock: Mutex::new(()),
        }
    }

    /// Plans a change with `plan` over the current servers and commits it.
    /// `plan` may run more than once (after a conflict) and must be pure.
    /// An empty change commits nothing and returns the current revision.
    pub async fn apply<E>(
        &self,
        mut plan: impl FnMut(ServersView<'_>) -> Result<Change, E>,
    ) -> Result<Revision, WriteError<E>> {
        let _serial = self.lock.lock().await;
        self.hub.wait_loaded().await;
        for _ in 0..MAX_ATTEMPTS {
            let (epoch, expected, planned) = self
                .hub
                .with_servers(|epoch, revision, view| (epoch, revision, plan(view)));
            let change = planned.map_err(WriteError::Rejected)?;
            if change.is_empty() {
                return Ok(expected);
            }
            match self.hub.store().commit(expected, change).await {
                Ok(revision) => {
                    let _ =
                        tokio::time::timeout(VISIBILITY_WAIT, self.hub.wait_for(epoch, revision))
                            .await;
                    return Ok(revision);
                }
                Err(StoreError::Conflict { actual, .. }) => {
                    let wait = self.hub.wait_for(epoch, actual.max(expected + 1));
                    let _ = tokio::time::timeout(VISIBILITY_WAIT, wait).await;
                }
                Err(error) => return Err(WriteError::Store(error)),
            }
        }
        Err(WriteError::Store(StoreError::Unavailable(
            "the registry kept changing under this write; try again".to_string(),
        )))
    }
}
