//! The follower: the one task that reads the store and feeds the hub (the
//! writer of its state; streams only read it). Entry point: [`Hub::start`].
//!
//! It loads a snapshot, reloads recent history into the ring (so nodes that
//! were in sync before an SMS restart resume with deltas), then applies every
//! committed change in order. A watch that breaks (etcd restarted, network)
//! is resumed from the hub's revision, keeping the ring; only a gap or lost
//! history makes it reload the whole registry.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tracing::{debug, info, warn};

use super::hub::{Hub, HubConfig};
use crate::store::{CommittedStream, RegistryStore, Revision, StoreError};
use spear_common::Backoff;

/// How long the hub waits for history while prefilling before it starts
/// serving anyway (nodes then get snapshots instead of deltas).
const PREFILL_PATIENCE: Duration = Duration::from_secs(5);

impl Hub {
    /// Creates the hub and starts following `store`. The hub serves no
    /// stream until its first snapshot is loaded; see [`Hub::wait_loaded`].
    pub fn start(store: Arc<dyn RegistryStore>, config: HubConfig) -> Arc<Hub> {
        let hub = Hub::new(store, config);
        tokio::spawn(run(Arc::clone(&hub)));
        hub
    }
}

async fn run(hub: Arc<Hub>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        let snapshot = match hub.store.load().await {
            Ok(snapshot) => snapshot,
            Err(error) => {
                warn!(%error, "cannot load the registry from the store; retrying");
                backoff.sleep().await;
                continue;
            }
        };
        backoff.reset();
        let loaded_at = snapshot.revision;
        info!(
            epoch = snapshot.epoch,
            revision = loaded_at,
            servers = snapshot.servers.len(),
            store = hub.store.kind(),
            "registry loaded"
        );
        hub.install(snapshot, false);
        let stream = prefill(&hub, loaded_at).await;
        hub.mark_loaded();
        follow(&hub, stream, &mut backoff).await;
        hub.stats.reloads.fetch_add(1, Ordering::Relaxed);
    }
}

/// Replays recent history into the ring and returns the stream positioned
/// after `loaded_at`, ready for live changes.
async fn prefill(hub: &Hub, loaded_at: Revision) -> Option<CommittedStream> {
    let mut after = loaded_at.saturating_sub(hub.config.prefill_span);
    'attempt: loop {
        if after >= loaded_at {
            return hub.store.watch(loaded_at).await.ok();
        }
        let mut stream = match hub.store.watch(after).await {
            Ok(stream) => stream,
            Err(StoreError::Compacted { compacted }) if compacted > after => {
                after = compacted;
                continue 'attempt;
            }
            Err(error) => {
                debug!(%error, "no history to prefill");
                return hub.store.watch(loaded_at).await.ok();
            }
        };
        loop {
            match tokio::time::timeout(PREFILL_PATIENCE, stream.next()).await {
                Ok(Some(Ok(committed))) => {
                    if committed.revision > loaded_at {
                        // Nothing at `loaded_at` itself was in the history;
                        // this one is live.
                        return hub.apply(&committed).then_some(stream);
                    }
                    if !hub.prefill(&committed) {
                        hub.reset_ring();
                    }
                    if committed.revision == loaded_at {
                        return Some(stream);
                    }
                }
                Ok(Some(Err(StoreError::Compacted { compacted }))) if compacted > after => {
                    hub.reset_ring();
                    after = compacted;
                    continue 'attempt;
                }
                Ok(Some(Err(error))) => {
                    warn!(%error, "registry history unavailable while prefilling");
                    hub.reset_ring();
                    return hub.store.watch(loaded_at).await.ok();
                }
                Ok(None) | Err(_) => {
                    hub.reset_ring();
                    return hub.store.watch(loaded_at).await.ok();
                }
            }
        }
    }
}

/// Applies live changes until the history breaks in a way only a reload fixes.
async fn follow(hub: &Hub, mut stream: Option<CommittedStream>, backoff: &mut Backoff) {
    loop {
        let Some(current) = stream.as_mut() else {
            backoff.sleep().await;
            let (_, revision) = hub.position();
            match hub.store.watch(revision).await {
                Ok(resumed) => {
                    info!(revision, "registry watch resumed");
                    stream = Some(resumed);
                }
                Err(StoreError::Compacted { .. }) => return,
                Err(error) => warn!(%error, "registry store unavailable; serving the last state"),
            }
            continue;
        };
        match current.next().await {
            Some(Ok(committed)) => {
                backoff.reset();
                if !hub.apply(&committed) {
                    let (_, revision) = hub.position();
                    warn!(
                        revision,
                        got = committed.revision,
                        prev = committed.prev_revision,
                        "registry change does not follow the current revision; reloading"
                    );
                    return;
                }
            }
            Some(Err(StoreError::Compacted { compacted })) => {
                warn!(
                    compacted,
                    "registry history compacted under the hub; reloading"
                );
                return;
            }
            Some(Err(error)) => {
                warn!(%error, "registry watch broke; resuming");
                stream = None;
            }
            None => {
                debug!("registry watch ended; resuming");
                stream = None;
            }
        }
    }
}
