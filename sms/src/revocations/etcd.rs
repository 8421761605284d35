//! The list in etcd under `<prefix>/revoked/<identity/…|serial/…>` (a
//! protobuf `Revocation` each), shared by every SMS replica.

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use prost::Message;
use spear_proto::v1::Revocation;

use super::{RevocationError, RevocationStore};

pub struct EtcdRevocations {
    client: Client,
    prefix: String,
}

impl EtcdRevocations {
    /// Shares the registry store's connection.
    pub fn new(client: Client, prefix: &str) -> EtcdRevocations {
        EtcdRevocations {
            client,
            prefix: format!("{}/revoked/", prefix.trim_end_matches('/')),
        }
    }
}

fn unavailable(error: etcd_client::Error) -> RevocationError {
    RevocationError::Unavailable(format!("etcd: {error}"))
}

#[async_trait]
impl RevocationStore for EtcdRevocations {
    async fn list(&self) -> Result<Vec<Revocation>, RevocationError> {
        let mut client = self.client.clone();
        let response = client
            .get(self.prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        // An entry that does not decode is skipped, not fatal: the others
        // must stay in force.
        Ok(response
            .kvs()
            .iter()
            .filter_map(|kv| match Revocation::decode(kv.value()) {
                Ok(r) => Some(r),
                Err(error) => {
                    tracing::warn!(key = %String::from_utf8_lossy(kv.key()), %error, "a revocation in etcd does not decode; skipped");
                    None
                }
            })
            .collect())
    }

    async fn add(&self, key: &str, revocation: Revocation) -> Result<bool, RevocationError> {
        let mut client = self.client.clone();
        let key = format!("{}{key}", self.prefix);
        // Put only if absent, so the first record of a target stays.
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, revocation.encode_to_vec(), None)]);
        let response = client.txn(txn).await.map_err(unavailable)?;
        Ok(response.succeeded())
    }
}
