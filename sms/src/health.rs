//! SMS's probes, served next to `/metrics`: `/livez` answers whenever the
//! process serves HTTP; `/readyz` answers 200 when SMS can do its work — its
//! store answers a read within [`STORE_TIMEOUT`] and its server directory
//! (if it has one) has been loaded whole — and 503 with the reason when not.

use std::sync::Arc;
use std::time::Duration;

use crate::files::FileProblems;
use crate::store::StoreError;
use crate::watch::Hub;

/// How long a readiness probe waits for the store.
pub const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why SMS is not ready, in one sentence for the probe's body.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    #[error("not ready: the {kind} store does not answer: {error}")]
    Store {
        kind: &'static str,
        error: StoreError,
    },
    #[error("not ready: the {0} store did not answer within {STORE_TIMEOUT:?}")]
    StoreTimeout(&'static str),
    #[error("not ready: the MCP server directory has not been loaded yet (a file is waiting for the store)")]
    DirNotLoaded,
}

/// What the probes read.
#[derive(Clone)]
pub struct Health {
    hub: Arc<Hub>,
    problems: Arc<FileProblems>,
}

impl Health {
    pub fn new(hub: Arc<Hub>, problems: Arc<FileProblems>) -> Health {
        Health { hub, problems }
    }

    pub async fn readiness(&self) -> Result<(), NotReady> {
        let store = self.hub.store();
        let kind = store.kind();
        match tokio::time::timeout(STORE_TIMEOUT, store.ping()).await {
            Err(_) => return Err(NotReady::StoreTimeout(kind)),
            Ok(Err(error)) => return Err(NotReady::Store { kind, error }),
            Ok(Ok(())) => {}
        }
        if !self.problems.loaded() {
            return Err(NotReady::DirNotLoaded);
        }
        Ok(())
    }
}
