//! The registry store: one interface, two implementations.
//!
//! The store is the source of truth for the registry. Every write is one
//! atomic [`Change`] committed on top of an expected revision (optimistic
//! concurrency, so several SMS replicas sharing etcd serialise their writes),
//! and every committed change can be watched, in order, with the revision it
//! was applied on top of. SMS's watch hub is the store's only reader in
//! steady state; writers go through [`crate::writer`].

mod error;
pub mod etcd;
mod memory;

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::stream::BoxStream;
use spear_proto::v1::ServerRecord;

pub use error::StoreError;
pub use etcd::{EtcdStore, EtcdStoreConfig, EtcdTls, EtcdUser};
pub use memory::MemoryStore;

/// A registry revision. Strictly increasing within an epoch; not necessarily
/// contiguous (etcd's revisions are shared with other keys).
pub type Revision = u64;

/// Identifies one continuous history. A new epoch means a node must start over
/// from a snapshot rather than resume.
pub type Epoch = u64;

/// The whole registry as of one revision.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub epoch: Epoch,
    pub revision: Revision,
    pub servers: BTreeMap<String, ServerRecord>,
}

/// One atomic registry change, as a writer asks for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// Servers to create or replace (their `mod_revision` is set by the store).
    pub upserts: Vec<ServerRecord>,
    /// Ids of servers to remove. Removing an absent id is not an error.
    pub deletes: Vec<String>,
}

impl Change {
    /// True when committing would change nothing.
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.deletes.is_empty()
    }
}

/// One change as the store committed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub revision: Revision,
    /// The registry revision this change was applied on top of.
    pub prev_revision: Revision,
    /// Upserted servers, with `mod_revision == revision`.
    pub upserts: Vec<ServerRecord>,
    pub deletes: Vec<String>,
}

/// The stream returned by [`RegistryStore::watch`].
pub type CommittedStream = BoxStream<'static, Result<Committed, StoreError>>;

/// What SMS needs from a place to keep the registry.
#[async_trait]
pub trait RegistryStore: Send + Sync + 'static {
    /// A short name for status output and metrics: `memory` or `etcd`.
    fn kind(&self) -> &'static str;

    /// The whole registry, consistent as of one revision.
    async fn load(&self) -> Result<Snapshot, StoreError>;

    /// Commits `change` if the registry is still at `expected`; otherwise
    /// fails with [`StoreError::Conflict`] and changes nothing. An empty change
    /// is not committed and returns `expected`.
    async fn commit(&self, expected: Revision, change: Change) -> Result<Revision, StoreError>;

    /// Every change committed after `after`, in order, then new ones as they
    /// are committed. Fails with [`StoreError::Compacted`] when the history
    /// right after `after` is no longer kept.
    async fn watch(&self, after: Revision) -> Result<CommittedStream, StoreError>;

    /// Whether the store answers now (SMS's readiness): one cheap read.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
