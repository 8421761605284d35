//! The embedded store: the registry in this process, with a bounded history.
//!
//! The default for a single SMS: nothing else to run. Its epoch is chosen at
//! random when it is created, so nodes of a restarted SMS notice that the
//! history they knew is gone and take a snapshot.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_proto::v1::ServerRecord;
use tokio::sync::watch;

use super::{
    Change, Committed, CommittedStream, Epoch, RegistryStore, Revision, Snapshot, StoreError,
};

/// Changes kept by default for watchers that fall behind.
pub const DEFAULT_HISTORY: usize = 100_000;

#[derive(Debug, Default)]
struct State {
    revision: Revision,
    servers: BTreeMap<String, ServerRecord>,
    /// The most recent changes, oldest first.
    history: VecDeque<Arc<Committed>>,
}

impl State {
    /// The oldest `after` a watcher can start from.
    fn oldest_resumable(&self) -> Revision {
        self.history
            .front()
            .map_or(self.revision, |c| c.prev_revision)
    }
}

/// The in-memory registry store. Cheap to clone: clones share the registry.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    epoch: Epoch,
    history_limit: usize,
    state: Mutex<State>,
    committed: watch::Sender<Revision>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::with_history_limit(DEFAULT_HISTORY)
    }

    /// A store that keeps only the last `limit` changes for watchers.
    pub fn with_history_limit(limit: usize) -> Self {
        let (committed, _) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                epoch: rand::random::<u64>().max(1),
                history_limit: limit.max(1),
                state: Mutex::new(State::default()),
                committed,
            }),
        }
    }
}

impl Inner {
    /// Changes after `after` that are in history, or why not.
    fn changes_after(&self, after: Revision) -> Result<Vec<Arc<Committed>>, StoreError> {
        let state = self.state.lock();
        if after < state.oldest_resumable() {
            return Err(StoreError::Compacted {
                compacted: state.oldest_resumable(),
            });
        }
        let start = state.history.partition_point(|c| c.revision <= after);
        Ok(state.history.iter().skip(start).cloned().collect())
    }
}

#[async_trait]
impl RegistryStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        let state = self.inner.state.lock();
        Ok(Snapshot {
            epoch: self.inner.epoch,
            revision: state.revision,
            servers: state.servers.clone(),
        })
    }

    async fn commit(&self, expected: Revision, change: Change) -> Result<Revision, StoreError> {
        let mut state = self.inner.state.lock();
        if state.revision != expected {
            return Err(StoreError::Conflict {
                expected,
                actual: state.revision,
            });
        }
        let deletes: Vec<String> = change
            .deletes
            .into_iter()
            .filter(|id| state.servers.contains_key(id))
            .collect();
        if change.upserts.is_empty() && deletes.is_empty() {
            return Ok(expected);
        }
        let revision = expected + 1;
        let mut upserts = change.upserts;
        for record in &mut upserts {
            record.mod_revision = revision;
        }
        for id in &deletes {
            state.servers.remove(id);
        }
        for record in &upserts {
            if let Some(spec) = &record.spec {
                state.servers.insert(spec.id.clone(), record.clone());
            }
        }
        state.revision = revision;
        state.history.push_back(Arc::new(Committed {
            revision,
            prev_revision: expected,
            upserts,
            deletes,
        }));
        while state.history.len() > self.inner.history_limit {
            state.history.pop_front();
        }
        drop(state);
        self.inner.committed.send_replace(revision);
        Ok(revision)
    }

    async fn watch(&self, after: Revision) -> Result<CommittedStream, StoreError> {
        // Fail at the call when the start is already gone.
        self.inner.changes_after(after)?;
        let watcher = Watcher {
            committed: self.inner.committed.subscribe(),
            inner: Arc::clone(&self.inner),
            cursor: after,
            queue: VecDeque::new(),
        };
        Ok(Box::pin(futures::stream::unfold(
            watcher,
            |mut w| async move {
                let item = w.next().await;
                Some((item, w))
            },
        )))
    }
}

/// One watcher's position in the history.
struct Watcher {
    inner: Arc<Inner>,
    committed: watch::Receiver<Revision>,
    cursor: Revision,
    queue: VecDeque<Arc<Committed>>,
}

impl Watcher {
    async fn next(&mut self) -> Result<Committed, StoreError> {
        loop {
            if let Some(next) = self.queue.pop_front() {
                self.cursor = next.revision;
                return Ok((*next).clone());
            }
            self.committed.borrow_and_update();
            let changes = self.inner.changes_after(self.cursor)?;
            if !changes.is_empty() {
                self.queue.extend(changes);
                continue;
            }
            // The sender lives in `inner`, which this watcher holds: it never closes.
            let _ = self.committed.changed().await;
        }
    }
}
