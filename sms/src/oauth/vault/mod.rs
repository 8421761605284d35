//! Where credential records are kept: one interface, two implementations
//! (in memory for a single SMS, etcd for replicas), like the registry's
//! store. Records arrive sealed; the vault never sees a token.
//!
//! Besides reads and writes, a vault gives a [`RenewalLock`] per server:
//! whoever renews or replaces a credential holds it, so every replica
//! sharing the vault renews a credential once, not once each. (With
//! rotating refresh tokens a second renewal would also present a token the
//! first one spent, which authorization servers treat as theft.)

mod etcd;
mod memory;

use async_trait::async_trait;
use spear_proto::v1::CredentialRecord;

pub use etcd::EtcdVault;
pub use memory::MemoryVault;

/// Why the vault could not answer.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("the credential store is unreachable: {0}")]
    Unavailable(String),
    #[error("the credential record at {key} is unreadable ({reason}); delete it with `sms oauth logout` and log in again")]
    Corrupt { key: String, reason: String },
    #[error("another SMS replica has been renewing this credential for over {0:?}; try again")]
    Busy(std::time::Duration),
}

/// Held while one credential is renewed or replaced; dropping it lets the
/// next holder in.
#[must_use = "dropping the lock releases it"]
pub struct RenewalLock {
    _held: Box<dyn Send>,
}

impl RenewalLock {
    pub fn new(held: impl Send + 'static) -> RenewalLock {
        RenewalLock {
            _held: Box::new(held),
        }
    }
}

/// What the broker needs from a place to keep credentials.
#[async_trait]
pub trait Vault: Send + Sync + 'static {
    async fn get(&self, server_id: &str) -> Result<Option<CredentialRecord>, VaultError>;

    /// Creates or replaces the record of `record.server_id`.
    async fn put(&self, record: CredentialRecord) -> Result<(), VaultError>;

    /// Removes it; whether there was one.
    async fn delete(&self, server_id: &str) -> Result<bool, VaultError>;

    async fn list(&self) -> Result<Vec<CredentialRecord>, VaultError>;

    /// Waits for the renewal lock of `server_id` (across replicas).
    async fn lock(&self, server_id: &str) -> Result<RenewalLock, VaultError>;
}
