//! The hub's shared state: the current registry, the ring of recent encoded
//! deltas and the cached snapshot of the current revision.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use spear_common::metrics::Histogram;
use spear_proto::frame::EncodedEvent;
use spear_proto::scope::in_scope;
use spear_proto::v1::ServerRecord;
use tokio::sync::watch;

use super::encode;
use super::frames::{is_scoped, DeltaFrame, Entry, ScopedSnapshots, SnapshotFrames};
use crate::store::{Committed, Epoch, RegistryStore, Revision, Snapshot};

/// Tuning of the hub.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Deltas kept for resuming nodes. A node further behind gets a snapshot.
    pub history_len: usize,
    /// Upper bound on the bytes held by the ring of deltas.
    pub history_bytes: usize,
    /// How often an idle stream is sent a progress message: how a node
    /// knows its SMS is there, and a write whose missing acknowledgement
    /// tells SMS's kernel a node is gone (see `spear_identity`'s
    /// keepalive). At 10,000 nodes, the default 60 s is 167 small frames
    /// a second, most of what an idle fleet costs SMS (docs/benchmarks.md).
    pub progress_interval: Duration,
    /// How far back (in store revisions) to reload history when the hub
    /// starts, so nodes that were in sync before an SMS restart resume with
    /// deltas. Only stores whose epoch survives a restart (etcd) have any.
    pub prefill_span: u64,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            history_len: 10_000,
            history_bytes: 64 * 1024 * 1024,
            progress_interval: Duration::from_secs(60),
            prefill_span: 100_000,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub epoch: Epoch,
    pub revision: Revision,
    pub(super) servers: BTreeMap<String, Entry>,
    /// How many of them are scoped to some nodes (snapshots are then
    /// encoded per node).
    pub(super) scoped: usize,
    ring: VecDeque<Arc<DeltaFrame>>,
    ring_bytes: usize,
    /// Every change after `ring_base` is in the ring.
    pub ring_base: Revision,
    /// False until the first snapshot is loaded from the store.
    pub loaded: bool,
}

impl State {
    /// Deltas after `after`, or `None` if some of them left the ring.
    pub fn deltas_after(&self, after: Revision) -> Option<Vec<Arc<DeltaFrame>>> {
        if after < self.ring_base || after > self.revision {
            return None;
        }
        let start = self.ring.partition_point(|d| d.revision <= after);
        Some(self.ring.iter().skip(start).cloned().collect())
    }
}

/// A read-only view of the registry's servers, lent to writers.
pub struct ServersView<'a> {
    servers: &'a BTreeMap<String, Entry>,
}

impl<'a> ServersView<'a> {
    pub fn get(&self, id: &str) -> Option<&'a ServerRecord> {
        self.servers.get(id).map(|e| &e.record)
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a ServerRecord> + 'a {
        self.servers.values().map(|e| &e.record)
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// Counters the hub exposes for status and metrics.
#[derive(Debug, Default)]
pub struct HubStats {
    /// Watch streams currently open.
    pub streams: AtomicUsize,
    /// Snapshots encoded since start (one per revision that was asked for).
    pub snapshot_encodes: AtomicU64,
    /// Snapshots sent to streams.
    pub snapshots_sent: AtomicU64,
    /// Deltas sent to streams.
    pub deltas_sent: AtomicU64,
    /// Times the follower had to reload the whole registry from the store.
    pub reloads: AtomicU64,
}

/// SMS's live view of the registry and the source of every watch stream.
pub struct Hub {
    pub(super) config: HubConfig,
    pub(super) state: RwLock<State>,
    snapshot_cache: Mutex<Option<Arc<SnapshotFrames>>>,
    /// Snapshots for nodes outside some server's scope, by which scopes.
    pub(super) scoped_snapshots: Mutex<ScopedSnapshots>,
    pub(super) changed: watch::Sender<(Epoch, Revision)>,
    /// Set when SMS shuts down: every watch stream ends.
    pub(super) closing: watch::Sender<bool>,
    pub stats: HubStats,
    pub(super) store: Arc<dyn RegistryStore>,
    /// When each recent revision was applied here, to time its way to nodes.
    applied_times: Mutex<VecDeque<(Revision, Instant)>>,
    /// Seconds from a change being applied here to a node reporting, in a
    /// heartbeat, that it applied it too.
    pub propagation: Histogram,
}

/// Combinations of scopes whose snapshots are kept for a revision: a fleet
/// with more distinct ones gets the rest encoded per stream, not kept.
const KEPT_SCOPE_SNAPSHOTS: usize = 16;

/// Revisions whose apply time is kept: a node further behind than this
/// is resyncing, not propagating.
const KEPT_TIMES: usize = 4096;

impl Hub {
    /// The hub, empty and not yet following its store: `Hub::start` (in
    /// `follow.rs`, the one writer of its state) is how SMS makes one.
    pub(super) fn new(store: Arc<dyn RegistryStore>, config: HubConfig) -> Arc<Hub> {
        let (changed, _) = watch::channel((0, 0));
        let (closing, _) = watch::channel(false);
        Arc::new(Hub {
            config,
            state: RwLock::new(State::default()),
            snapshot_cache: Mutex::new(None),
            scoped_snapshots: Mutex::default(),
            changed,
            closing,
            stats: HubStats::default(),
            store,
            applied_times: Mutex::new(VecDeque::new()),
            propagation: spear_common::metrics::seconds_histogram(),
        })
    }

    /// A node that had applied `before` now reports `now`: observes how
    /// long `now` took to reach it since this SMS applied it.
    pub fn node_caught_up(&self, before: Revision, now: Revision) {
        if now <= before {
            return;
        }
        let applied = self
            .applied_times
            .lock()
            .iter()
            .find(|(revision, _)| *revision == now)
            .map(|(_, at)| *at);
        if let Some(at) = applied {
            self.propagation.observe(at.elapsed().as_secs_f64());
        }
    }

    /// Ends every watch stream (nodes reconnect elsewhere or later), so a
    /// graceful shutdown does not wait for streams that never end.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// The store this hub follows.
    pub fn store(&self) -> &Arc<dyn RegistryStore> {
        &self.store
    }

    /// The current `(epoch, revision)`.
    pub fn position(&self) -> (Epoch, Revision) {
        let state = self.state.read();
        (state.epoch, state.revision)
    }

    /// Notified with the new `(epoch, revision)` after every applied change.
    pub fn subscribe(&self) -> watch::Receiver<(Epoch, Revision)> {
        self.changed.subscribe()
    }

    /// Number of servers registered.
    pub fn server_count(&self) -> usize {
        self.state.read().servers.len()
    }

    /// Runs `f` over the current servers, with the revision they are at.
    pub fn with_servers<R>(&self, f: impl FnOnce(Epoch, Revision, ServersView<'_>) -> R) -> R {
        let state = self.state.read();
        f(
            state.epoch,
            state.revision,
            ServersView {
                servers: &state.servers,
            },
        )
    }

    /// Waits until the first snapshot is loaded.
    pub async fn wait_loaded(&self) {
        let mut rx = self.changed.subscribe();
        while !self.state.read().loaded {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits until the hub has applied `revision` (or moved to another epoch).
    pub async fn wait_for(&self, epoch: Epoch, revision: Revision) {
        let mut rx = self.changed.subscribe();
        loop {
            {
                let state = self.state.read();
                if state.loaded && (state.epoch != epoch || state.revision >= revision) {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The snapshot of the current revision, encoding it only if no stream
    /// asked for this revision before.
    pub(super) fn current_snapshot(&self) -> Arc<SnapshotFrames> {
        let mut cache = self.snapshot_cache.lock();
        let state = self.state.read();
        if let Some(cached) = cache.as_ref() {
            if cached.epoch == state.epoch && cached.revision == state.revision {
                return Arc::clone(cached);
            }
        }
        let frames = encode::snapshot_frames(
            state.epoch,
            state.revision,
            state.servers.values().map(|e| &e.encoded),
        );
        let snapshot = Arc::new(SnapshotFrames {
            epoch: state.epoch,
            revision: state.revision,
            frames,
        });
        self.stats.snapshot_encodes.fetch_add(1, Ordering::Relaxed);
        *cache = Some(Arc::clone(&snapshot));
        snapshot
    }

    /// Replaces the whole state with a snapshot loaded from the store.
    /// Streams wait until `ready` (or [`Hub::mark_loaded`]).
    pub(super) fn install(&self, snapshot: Snapshot, ready: bool) {
        let mut state = self.state.write();
        let servers: BTreeMap<String, Entry> = snapshot
            .servers
            .into_iter()
            .map(|(id, record)| (id, Entry::new(record)))
            .collect();
        *state = State {
            epoch: snapshot.epoch,
            revision: snapshot.revision,
            scoped: servers.values().filter(|e| e.stub.is_some()).count(),
            servers,
            ring: VecDeque::new(),
            ring_bytes: 0,
            ring_base: snapshot.revision,
            loaded: ready,
        };
        let position = (state.epoch, state.revision);
        drop(state);
        self.changed.send_replace(position);
    }

    /// Lets streams be served once the ring holds what history there is.
    pub(super) fn mark_loaded(&self) {
        let mut state = self.state.write();
        state.loaded = true;
        let position = (state.epoch, state.revision);
        drop(state);
        self.changed.send_replace(position);
    }

    /// Forgets the ring: nodes behind the current revision get snapshots.
    pub(super) fn reset_ring(&self) {
        let mut state = self.state.write();
        state.ring.clear();
        state.ring_bytes = 0;
        state.ring_base = state.revision;
    }

    /// Puts an already applied change (older than the loaded snapshot) into
    /// the ring, so nodes that have the revision before it can resume.
    /// Returns false when the change does not chain onto the ring.
    pub(super) fn prefill(&self, committed: &Committed) -> bool {
        let mut state = self.state.write();
        let chains = match state.ring.back() {
            Some(last) => last.revision == committed.prev_revision,
            None => true,
        };
        if !chains || committed.revision > state.revision {
            return false;
        }
        if state.ring.is_empty() {
            state.ring_base = committed.prev_revision;
        }
        let frame = encode::delta_frame(state.epoch, committed);
        self.push_delta(&mut state, committed, frame);
        true
    }

    /// Applies a newly committed change. Returns false when it does not
    /// follow the current revision (the caller then reloads).
    pub(super) fn apply(&self, committed: &Committed) -> bool {
        let mut state = self.state.write();
        if committed.prev_revision != state.revision || committed.revision <= state.revision {
            return false;
        }
        let scoped = |entry: Option<Entry>| usize::from(entry.is_some_and(|e| e.stub.is_some()));
        for id in &committed.deletes {
            let gone = state.servers.remove(id);
            state.scoped -= scoped(gone);
        }
        for record in &committed.upserts {
            let Some(spec) = record.spec.as_ref() else {
                continue;
            };
            let entry = Entry::new(record.clone());
            let added = usize::from(entry.stub.is_some());
            let replaced = state.servers.insert(spec.id.clone(), entry);
            state.scoped = state.scoped + added - scoped(replaced);
        }
        state.revision = committed.revision;
        let frame = encode::delta_frame(state.epoch, committed);
        self.push_delta(&mut state, committed, frame);
        let position = (state.epoch, state.revision);
        drop(state);
        {
            let mut times = self.applied_times.lock();
            times.push_back((committed.revision, Instant::now()));
            if times.len() > KEPT_TIMES {
                times.pop_front();
            }
        }
        self.changed.send_replace(position);
        true
    }

    fn push_delta(&self, state: &mut State, committed: &Committed, event: EncodedEvent) {
        state.ring_bytes += event.len();
        state.ring.push_back(Arc::new(DeltaFrame {
            revision: committed.revision,
            event,
            scoped: is_scoped(committed).then(|| committed.clone()),
            masked: Mutex::default(),
        }));
        while state.ring.len() > self.config.history_len
            || (state.ring_bytes > self.config.history_bytes && state.ring.len() > 1)
        {
            let Some(evicted) = state.ring.pop_front() else {
                break;
            };
            state.ring_bytes -= evicted.event.len();
            state.ring_base = evicted.revision;
        }
    }
}

impl Hub {
    /// The current snapshot as `node_id` receives it: the shared one,
    /// unless some server is scoped away from it.
    pub(super) fn snapshot_for(&self, node_id: &str) -> Arc<SnapshotFrames> {
        let state = self.state.read();
        if state.scoped == 0 {
            drop(state);
            return self.current_snapshot();
        }
        let scope: Vec<bool> = state
            .servers
            .values()
            .filter_map(|e| e.stub.as_ref().and(e.record.spec.as_ref()))
            .map(|spec| in_scope(spec, node_id))
            .collect();
        if scope.iter().all(|&for_it| for_it) {
            drop(state);
            return self.current_snapshot();
        }
        let at = (state.epoch, state.revision);
        let mut kept = self.scoped_snapshots.lock();
        if kept.at != at {
            *kept = ScopedSnapshots {
                at,
                by_scope: HashMap::new(),
            };
        }
        if let Some(snapshot) = kept.by_scope.get(&scope) {
            return Arc::clone(snapshot);
        }
        let frames = encode::snapshot_frames(
            state.epoch,
            state.revision,
            state.servers.values().map(|e| e.for_node(node_id)),
        );
        self.stats.snapshot_encodes.fetch_add(1, Ordering::Relaxed);
        let snapshot = Arc::new(SnapshotFrames {
            epoch: at.0,
            revision: at.1,
            frames,
        });
        if kept.by_scope.len() < KEPT_SCOPE_SNAPSHOTS {
            kept.by_scope.insert(scope, Arc::clone(&snapshot));
        }
        snapshot
    }
}
