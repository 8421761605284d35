//! The nodes' audit records in etcd under `<prefix>/audit/<node>/<seq, 20
//! digits>` (the node's JSON line), shared by every SMS replica and kept
//! across restarts. A record is written only if its key is absent, so a
//! re-sent record is kept once and a later copy never replaces the first;
//! each is attached to a lease that ends with the retention, granted once
//! per tenth of it, so old records leave etcd by themselves. A record
//! offered with other contents than the one held is a dispute: the copy
//! is kept under `<prefix>/audit-conflicts/<node>/<seq>/<its SHA-256>`
//! (within `conflicts.rs`'s bounds) for every replica's query and
//! `verify`, until an admin resolves it.

use std::time::Instant;

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
};
use parking_lot::Mutex;
use spear_proto::v1::AuditLine;

mod disputes;

use super::{AuditBook, AuditError, Retention, Shipped};

/// Records one transaction writes (etcd allows 128 operations, each
/// record is one compare and one put).
const TXN_RECORDS: usize = 64;

pub struct EtcdAudit {
    client: Client,
    prefix: String,
    conflicts_prefix: String,
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
            conflicts_prefix: format!("{}/audit-conflicts/", prefix.trim_end_matches('/')),
            retention,
            lease: Mutex::new(None),
        }
    }

    fn key(&self, node: &str, seq: u64) -> String {
        format!("{}{node}/{seq:020}", self.prefix)
    }

    /// The lease for records written now: a new one each tenth of the
    /// retention, living a retention past that.
    pub(super) async fn lease(&self) -> Result<i64, AuditError> {
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

    /// Writes the records of `node` that etcd does not hold yet: the keys
    /// it holds are read once for the shipment, the rest written in
    /// transactions of `TXN_RECORDS`, each only if none of its keys
    /// appeared meanwhile (another replica); a transaction that finds one
    /// is done again record by record.
    pub async fn ship(&self, node: &str, lines: Vec<AuditLine>) -> Result<Shipped, AuditError> {
        super::check_shipment(node, &lines)?;
        let mut shipped = Shipped::default();
        let (Some(first), Some(last)) = (
            lines.iter().map(|l| l.seq).min(),
            lines.iter().map(|l| l.seq).max(),
        ) else {
            return Ok(shipped);
        };
        let lease = self.lease().await?;
        let mut client = self.client.clone();
        let held = client
            .get(
                self.key(node, first),
                Some(GetOptions::new().with_range(self.key(node, last.saturating_add(1)))),
            )
            .await
            .map_err(unavailable)?;
        let held: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = held
            .kvs()
            .iter()
            .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
            .collect();
        let (absent, present): (Vec<AuditLine>, Vec<AuditLine>) = lines
            .into_iter()
            .partition(|l| !held.contains_key(self.key(node, l.seq).as_bytes()));
        for line in present {
            let same = held
                .get(self.key(node, line.seq).as_bytes())
                .is_some_and(|v| v.as_slice() == line.json.as_bytes());
            if same {
                shipped.duplicates += 1;
                continue;
            }
            if self.keep_copy(&mut client, node, &line, lease).await? {
                tracing::warn!(node_id = node, seq = line.seq, "audit: a record differs from the one held for its seq; both copies are kept until an admin resolves it");
                shipped.conflicts += 1;
            } else {
                shipped.duplicates += 1;
            }
        }
        for chunk in absent.chunks(TXN_RECORDS) {
            if self.put_absent(&mut client, node, chunk, lease).await? {
                shipped.stored += chunk.len() as u64;
                shipped.new.extend_from_slice(chunk);
                continue;
            }
            for line in chunk {
                if self
                    .put_absent(&mut client, node, std::slice::from_ref(line), lease)
                    .await?
                {
                    shipped.stored += 1;
                    shipped.new.push(line.clone());
                } else {
                    shipped.duplicates += 1;
                }
            }
        }
        Ok(shipped)
    }

    /// Writes `lines` in one transaction if none of their keys exists;
    /// whether it did.
    async fn put_absent(
        &self,
        client: &mut Client,
        node: &str,
        lines: &[AuditLine],
        lease: i64,
    ) -> Result<bool, AuditError> {
        let keys: Vec<String> = lines.iter().map(|l| self.key(node, l.seq)).collect();
        let txn = Txn::new()
            .when(
                keys.iter()
                    .map(|k| Compare::create_revision(k.clone(), CompareOp::Equal, 0))
                    .collect::<Vec<_>>(),
            )
            .and_then(
                keys.into_iter()
                    .zip(lines)
                    .map(|(k, l)| {
                        TxnOp::put(k, l.json.clone(), Some(PutOptions::new().with_lease(lease)))
                    })
                    .collect::<Vec<_>>(),
            );
        Ok(client.txn(txn).await.map_err(unavailable)?.succeeded())
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
        let conflicts = client
            .get(
                self.conflicts_prefix.clone(),
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .map_err(unavailable)?;
        for kv in conflicts.kvs() {
            let key = String::from_utf8_lossy(kv.key());
            let Some((node, seq, sha256)) = key
                .strip_prefix(&self.conflicts_prefix)
                .and_then(split_copy_key)
            else {
                continue;
            };
            let json = String::from_utf8_lossy(kv.value()).into_owned();
            book.conflicts.note_copy(
                node,
                seq,
                super::conflicts::Copy {
                    sha256: sha256.to_string(),
                    json,
                },
            );
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

/// `<node>/<seq>/<sha256>` of a kept copy's key.
fn split_copy_key(rest: &str) -> Option<(&str, u64, &str)> {
    let (node_seq, sha256) = rest.rsplit_once('/')?;
    let (node, seq) = node_seq.rsplit_once('/')?;
    Some((node, seq.parse().ok()?, sha256))
}
