//! The nodes' audit records in etcd under `<prefix>/audit/<node>/<seq, 20
//! digits>` (the node's JSON line), shared by every SMS replica and kept
//! across restarts. A record is written only if its key is absent, so a
//! re-sent record is kept once and a later copy never replaces the first;
//! each is attached to a lease that ends with the retention, granted once
//! per tenth of it, so old records leave etcd by themselves.

use std::time::Instant;

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
};
use parking_lot::Mutex;
use spear_proto::v1::AuditLine;

use super::{AuditBook, AuditError, Retention, Shipped};

pub struct EtcdAudit {
    client: Client,
    prefix: String,
    retention: Retention,
    /// The lease new records get, and when it was granted.
    lease: Mutex<Option<(Instant, i64)>>,
}

fn unavailable(error: etcd_client::Error) -> AuditError {
    AuditError::Unavailable(format!("etcd: {error}"))
}

impl EtcdAudit {
    /// Shares the registry store's connection.
    pub fn new(client: Client, prefix: &str, retention: Retention) -> Self {
        Self {
            client,
            prefix: format!("{}/audit/", prefix.trim_end_matches('/')),
            retention,
            lease: Mutex::new(None),
        }
    }

    fn key(&self, node: &str, seq: u64) -> String {
        format!("{}{node}/{seq:020}", self.prefix)
    }

    /// The lease for records written now: a new one each tenth of the
    /// retention, living a retention past that.
    async fn lease(&self) -> Result<i64, AuditError> {
        let bucket = self.retention.max_age / 10;
        if let Some((granted, id)) = *self.lease.lock() {
            if granted.elapsed() < bucket {
                return Ok(id);
            }
        }
        let ttl = (self.retention.max_age + bucket).as_secs().max(1) as i64;
        let mut client = self.client.clone();
        let id = client
            .lease_grant(ttl, None)
            .await
            .map_err(unavailable)?
            .id();
        *self.lease.lock() = Some((Instant::now(), id));
        Ok(id)
    }

    /// Writes the records of `node` that etcd does not hold yet.
    pub async fn ship(&self, node: &str, lines: Vec<AuditLine>) -> Result<Shipped, AuditError> {
        super::check_shipment(&lines)?;
        let mut shipped = Shipped::default();
        if lines.is_empty() {
            return Ok(shipped);
        }
        let lease = self.lease().await?;
        let mut client = self.client.clone();
        for line in lines {
            let key = self.key(node, line.seq);
            let txn = Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key,
                    line.json.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            let written = client.txn(txn).await.map_err(unavailable)?.succeeded();
            if written {
                shipped.stored += 1;
                shipped.new.push(line);
            } else {
                shipped.duplicates += 1;
            }
        }
        Ok(shipped)
    }

    /// Every record etcd holds, in a book of its own (for a query or a
    /// verify on any replica).
    pub async fn load(&self) -> Result<AuditBook, AuditError> {
        let mut client = self.client.clone();
        let response = client
            .get(self.prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        let book = AuditBook::default();
        for kv in response.kvs() {
            let key = String::from_utf8_lossy(kv.key());
            let Some((node, seq)) = key
                .strip_prefix(&self.prefix)
                .and_then(|rest| rest.rsplit_once('/'))
            else {
                continue;
            };
            let Ok(seq) = seq.parse() else { continue };
            let json = String::from_utf8_lossy(kv.value()).into_owned();
            book.keep(node, AuditLine { seq, json });
        }
        Ok(book)
    }

    /// The last record etcd holds of `node`: its seq and JSON line.
    pub async fn last_of(&self, node: &str) -> Result<Option<AuditLine>, AuditError> {
        let mut client = self.client.clone();
        let options = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Key, SortOrder::Descend)
            .with_limit(1);
        let response = client
            .get(format!("{}{node}/", self.prefix), Some(options))
            .await
            .map_err(unavailable)?;
        Ok(response.kvs().first().and_then(|kv| {
            let key = String::from_utf8_lossy(kv.key());
            let seq = key.rsplit_once('/')?.1.parse().ok()?;
            Some(AuditLine {
                seq,
                json: String::from_utf8_lossy(kv.value()).into_owned(),
            })
        }))
    }
}
