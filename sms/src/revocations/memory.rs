//! The list in this process, for an SMS with the embedded store.

use std::collections::BTreeMap;

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_proto::v1::Revocation;

use super::{RevocationError, RevocationStore};

#[derive(Default)]
pub struct MemoryRevocations {
    entries: Mutex<BTreeMap<String, Revocation>>,
}

#[async_trait]
impl RevocationStore for MemoryRevocations {
    async fn list(&self) -> Result<Vec<Revocation>, RevocationError> {
        Ok(self.entries.lock().values().cloned().collect())
    }

    async fn add(&self, key: &str, revocation: Revocation) -> Result<bool, RevocationError> {
        let mut entries = self.entries.lock();
        if entries.contains_key(key) {
            return Ok(false);
        }
        entries.insert(key.to_string(), revocation);
        Ok(true)
    }
}
