//! Disputed seqs on etcd: each other copy under
//! `<prefix>/audit-conflicts/<node>/<seq, 20 digits>/<its SHA-256>`, on
//! the records' lease, kept once (the key is written only if absent), and
//! ended by an admin in one transaction (see `../conflicts.rs` for why
//! both copies are kept).

use etcd_client::{Client, Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp};
use spear_proto::v1::AuditLine;

use super::{unavailable, EtcdAudit};
use crate::audit::conflicts::{offered_hash, Copy, MAX_COPIES_PER_NODE, MAX_COPIES_PER_SEQ};
use crate::audit::resolve::{choose, Resolved};
use crate::audit::AuditError;

impl EtcdAudit {
    fn node_copies(&self, node: &str) -> String {
        format!("{}{node}/", self.conflicts_prefix)
    }

    fn seq_copies(&self, node: &str, seq: u64) -> String {
        format!("{}{node}/{seq:020}/", self.conflicts_prefix)
    }

    /// Keeps `line` as another copy of its seq; whether it is one SMS did
    /// not have (kept, or past the bounds and only counted by the caller).
    pub(super) async fn keep_copy(
        &self,
        client: &mut Client,
        node: &str,
        line: &AuditLine,
        lease: i64,
    ) -> Result<bool, AuditError> {
        let key = format!(
            "{}{}",
            self.seq_copies(node, line.seq),
            offered_hash(&line.json)
        );
        if count(client, &key, false).await? > 0 {
            return Ok(false);
        }
        let in_node = count(client, &self.node_copies(node), true).await?;
        let in_seq = count(client, &self.seq_copies(node, line.seq), true).await?;
        if in_node >= MAX_COPIES_PER_NODE as i64 || in_seq >= MAX_COPIES_PER_SEQ as i64 {
            tracing::warn!(
                node_id = node,
                seq = line.seq,
                "audit: another copy of a record past what SMS keeps of disputes; counted, not kept"
            );
            return Ok(true);
        }
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                line.json.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )]);
        Ok(client.txn(txn).await.map_err(unavailable)?.succeeded())
    }

    /// Ends the dispute over `node`'s `seq`, keeping the copy whose
    /// SHA-256 is `keep`: the others deleted, and the kept one written as
    /// the chain's record when it was not, in one transaction.
    pub async fn resolve(&self, node: &str, seq: u64, keep: &str) -> Result<Resolved, AuditError> {
        let mut client = self.client.clone();
        let held = client
            .get(self.key(node, seq), None)
            .await
            .map_err(unavailable)?;
        let held = held
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
        let prefix = self.seq_copies(node, seq);
        let kept = client
            .get(prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        let mut kvs: Vec<_> = kept.kvs().iter().collect();
        kvs.sort_by_key(|kv| kv.create_revision());
        let copies: Vec<Copy> = kvs
            .into_iter()
            .map(|kv| Copy {
                sha256: String::from_utf8_lossy(kv.key())
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                json: String::from_utf8_lossy(kv.value()).into_owned(),
            })
            .collect();
        let (replacement, resolved) = choose(node, seq, keep, held.as_deref(), &copies)?;
        let mut ops = vec![TxnOp::delete(
            prefix,
            Some(DeleteOptions::new().with_prefix()),
        )];
        if let Some(json) = replacement {
            let lease = self.lease().await?;
            ops.push(TxnOp::put(
                self.key(node, seq),
                json,
                Some(PutOptions::new().with_lease(lease)),
            ));
        }
        client
            .txn(Txn::new().and_then(ops))
            .await
            .map_err(unavailable)?;
        Ok(resolved)
    }
}

/// Keys at `key` (or under it, as a prefix).
async fn count(client: &mut Client, key: &str, prefix: bool) -> Result<i64, AuditError> {
    let mut options = GetOptions::new().with_count_only();
    if prefix {
        options = options.with_prefix();
    }
    Ok(client
        .get(key, Some(options))
        .await
        .map_err(unavailable)?
        .count())
}
