//! Credentials in this process: for a single SMS with the memory store
//! (they are gone at restart, like its registry).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_proto::v1::CredentialRecord;

use super::{RenewalLock, Vault, VaultError};

#[derive(Default)]
pub struct MemoryVault {
    records: Mutex<BTreeMap<String, CredentialRecord>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

#[async_trait]
impl Vault for MemoryVault {
    async fn get(&self, server_id: &str) -> Result<Option<CredentialRecord>, VaultError> {
        Ok(self.records.lock().get(server_id).cloned())
    }

    async fn put(&self, record: CredentialRecord) -> Result<(), VaultError> {
        self.records.lock().insert(record.server_id.clone(), record);
        Ok(())
    }

    async fn delete(&self, server_id: &str) -> Result<bool, VaultError> {
        Ok(self.records.lock().remove(server_id).is_some())
    }

    async fn list(&self) -> Result<Vec<CredentialRecord>, VaultError> {
        Ok(self.records.lock().values().cloned().collect())
    }

    async fn lock(&self, server_id: &str) -> Result<RenewalLock, VaultError> {
        let lock = Arc::clone(self.locks.lock().entry(server_id.to_string()).or_default());
        Ok(RenewalLock::new(lock.lock_owned().await))
    }
}
