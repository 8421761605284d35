//! Credentials in etcd under `<prefix>/oauth/credentials/<server id>` (a
//! protobuf `CredentialRecord`, sealed inside), shared by every SMS replica
//! of the installation. The renewal lock is etcd's own lock service on
//! `<prefix>/oauth/locks/<server id>`, held with a lease so a replica that
//! dies mid-renewal frees it when the lease runs out.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, GetOptions, LockOptions};
use prost::Message;
use spear_proto::v1::CredentialRecord;

use super::{RenewalLock, Vault, VaultError};

/// How long a renewal may hold the lock if its replica goes silent. A
/// renewal is one token request, bounded well below this.
const LEASE_TTL_SECS: i64 = 30;
/// How long to wait for another replica's renewal before giving up.
const WAIT: Duration = Duration::from_secs(45);

pub struct EtcdVault {
    client: Client,
    records: String,
    locks: String,
}

impl EtcdVault {
    /// Shares the registry store's connection.
    pub fn new(client: Client, prefix: &str) -> EtcdVault {
        let prefix = prefix.trim_end_matches('/');
        EtcdVault {
            client,
            records: format!("{prefix}/oauth/credentials/"),
            locks: format!("{prefix}/oauth/locks/"),
        }
    }

    fn key(&self, server_id: &str) -> String {
        format!("{}{server_id}", self.records)
    }
}

fn unavailable(error: etcd_client::Error) -> VaultError {
    VaultError::Unavailable(format!("etcd: {error}"))
}

fn decode(key: &[u8], value: &[u8]) -> Result<CredentialRecord, VaultError> {
    CredentialRecord::decode(value).map_err(|e| VaultError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
}

/// The lease behind a held lock: revoking it releases the lock at once
/// (dropping it without a runtime leaves it to expire).
struct LeaseHold {
    client: Client,
    lease: i64,
}

impl Drop for LeaseHold {
    fn drop(&mut self) {
        let mut client = self.client.clone();
        let lease = self.lease;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = client.lease_revoke(lease).await {
                    tracing::debug!(%error, lease, "renewal lock left to expire");
                }
            });
        }
    }
}

#[async_trait]
impl Vault for EtcdVault {
    async fn get(&self, server_id: &str) -> Result<Option<CredentialRecord>, VaultError> {
        let mut client = self.client.clone();
        let response = client
            .get(self.key(server_id), None)
            .await
            .map_err(unavailable)?;
        response
            .kvs()
            .first()
            .map(|kv| decode(kv.key(), kv.value()))
            .transpose()
    }

    async fn put(&self, record: CredentialRecord) -> Result<(), VaultError> {
        let mut client = self.client.clone();
        client
            .put(self.key(&record.server_id), record.encode_to_vec(), None)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn delete(&self, server_id: &str) -> Result<bool, VaultError> {
        let mut client = self.client.clone();
        let response = client
            .delete(self.key(server_id), None)
            .await
            .map_err(unavailable)?;
        Ok(response.deleted() > 0)
    }

    async fn list(&self) -> Result<Vec<CredentialRecord>, VaultError> {
        let mut client = self.client.clone();
        let response = client
            .get(self.records.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        response
            .kvs()
            .iter()
            .map(|kv| decode(kv.key(), kv.value()))
            .collect()
    }

    async fn lock(&self, server_id: &str) -> Result<RenewalLock, VaultError> {
        let mut client = self.client.clone();
        let lease = client
            .lease_grant(LEASE_TTL_SECS, None)
            .await
            .map_err(unavailable)?
            .id();
        // From here the lease is released however this ends.
        let hold = LeaseHold {
            client: client.clone(),
            lease,
        };
        let name = format!("{}{server_id}", self.locks);
        match tokio::time::timeout(
            WAIT,
            client.lock(name, Some(LockOptions::new().with_lease(lease))),
        )
        .await
        {
            Ok(Ok(_)) => Ok(RenewalLock::new(hold)),
            Ok(Err(error)) => Err(unavailable(error)),
            Err(_) => Err(VaultError::Busy(WAIT)),
        }
    }
}
