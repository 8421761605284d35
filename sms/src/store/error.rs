use super::Revision;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The registry moved since the revision the writer based its change on.
    #[error("the registry changed concurrently (expected revision {expected}, found {actual}); retry on the new state")]
    Conflict {
        expected: Revision,
        actual: Revision,
    },
    /// History right after the requested revision is gone: `compacted` is the
    /// lowest revision a watch can start after now. The reader needs a snapshot.
    #[error("registry history before revision {compacted} has been compacted; a full snapshot is needed")]
    Compacted { compacted: Revision },
    /// The backing service (etcd) failed or is unreachable.
    #[error("registry store unavailable: {0}")]
    Unavailable(String),
    /// A stored value could not be decoded.
    #[error("registry store holds a corrupt value at {key}: {reason}")]
    Corrupt { key: String, reason: String },
}
