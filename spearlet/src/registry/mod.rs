//! The node's registry view: an immutable snapshot swapped atomically, so
//! readers never see a half-applied change and never wait for the sync task.

mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use spear_proto::v1::{ServerRecord, ServerSpec};
use tokio::sync::watch;

pub use render::{redacted_json, table};

/// The registry as the node has applied it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegistryView {
    pub epoch: u64,
    pub revision: u64,
    pub servers: BTreeMap<String, Arc<ServerRecord>>,
}

impl RegistryView {
    /// A registry of exactly these servers, not synced from SMS: what
    /// `spearlet mcp` uses for one server, and what tests and benchmarks
    /// build their nodes from.
    pub fn from_specs(specs: impl IntoIterator<Item = ServerSpec>) -> Self {
        let servers = specs
            .into_iter()
            .map(|spec| {
                let record = ServerRecord {
                    spec: Some(spec.clone()),
                    source: None,
                    mod_revision: 1,
                    pins: None,
                };
                (spec.id, Arc::new(record))
            })
            .collect();
        Self {
            epoch: 1,
            revision: 1,
            servers,
        }
    }

    /// The position to resume from, `(0, 0)` for an empty node.
    pub fn position(&self) -> (u64, u64) {
        (self.epoch, self.revision)
    }
}

/// One applied change: the new view and exactly which servers it touched, so
/// later layers (MCP connections, tool caches) invalidate only those.
#[derive(Debug, Clone, Default)]
pub struct RegistryChange {
    pub view: Arc<RegistryView>,
    pub affected: Arc<BTreeSet<String>>,
}

/// Shared access to the current view and a feed of changes.
#[derive(Clone)]
pub struct RegistryHandle {
    current: Arc<ArcSwap<RegistryView>>,
    changes: watch::Sender<RegistryChange>,
}

impl RegistryHandle {
    pub fn new(initial: RegistryView) -> Self {
        let view = Arc::new(initial);
        let (changes, _) = watch::channel(RegistryChange {
            view: Arc::clone(&view),
            affected: Arc::default(),
        });
        Self {
            current: Arc::new(ArcSwap::new(view)),
            changes,
        }
    }

    /// The current view; cheap, lock-free.
    pub fn current(&self) -> Arc<RegistryView> {
        self.current.load_full()
    }

    /// Replaces the view and tells subscribers which servers changed.
    pub fn publish(&self, view: Arc<RegistryView>, affected: BTreeSet<String>) {
        self.current.store(Arc::clone(&view));
        self.changes.send_replace(RegistryChange {
            view,
            affected: Arc::new(affected),
        });
    }

    /// Changes from now on (the latest is always available).
    pub fn subscribe(&self) -> watch::Receiver<RegistryChange> {
        self.changes.subscribe()
    }
}
