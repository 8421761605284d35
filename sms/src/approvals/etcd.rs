//! Approvals on etcd under `<prefix>/approvals/<id>` (a protobuf
//! `ApprovalInfo`, its arguments kept while pending), so every SMS replica
//! lists and decides every approval, a call waiting through one replica is
//! released by a decision on another, and a restart loses none.
//!
//! Each replica keeps a mirror of the prefix in its [`ApprovalBook`]: it
//! loads it at start and follows it with a watch ([`follow`]); its own
//! writes are transactions on the key's revision, so two replicas never
//! both decide or both claim one approval.

use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use prost::Message;
use spear_proto::v1::ApprovalInfo;
use tracing::warn;

use super::{ApprovalBook, ApprovalError};

/// Where approvals live on etcd.
#[derive(Clone)]
pub struct EtcdApprovals {
    client: Client,
    prefix: String,
}

/// What a guarded write found.
pub enum Written {
    /// Stored at this revision.
    At(i64),
    /// Someone else changed it first: what is there now (`None`: gone).
    Conflict(Option<Box<(ApprovalInfo, i64)>>),
}

fn unavailable(error: etcd_client::Error) -> ApprovalError {
    ApprovalError::Unavailable(format!("etcd: {error}"))
}

impl EtcdApprovals {
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            prefix: format!("{}/approvals/", prefix.trim_end_matches('/')),
        }
    }

    fn key(&self, id: &str) -> String {
        format!("{}{id}", self.prefix)
    }

    fn decode(kv: &etcd_client::KeyValue) -> Option<(ApprovalInfo, i64)> {
        match ApprovalInfo::decode(kv.value()) {
            Ok(info) => Some((info, kv.mod_revision())),
            Err(error) => {
                warn!(key = %String::from_utf8_lossy(kv.key()), %error, "a stored approval is corrupt; it is skipped");
                None
            }
        }
    }

    /// Every stored approval, and the revision they were read at.
    pub async fn load(&self) -> Result<(Vec<(ApprovalInfo, i64)>, i64), ApprovalError> {
        let response = self
            .client
            .clone()
            .get(self.prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        let revision = response.header().map_or(0, |h| h.revision());
        Ok((
            response.kvs().iter().filter_map(Self::decode).collect(),
            revision,
        ))
    }

    /// Stores `info` if the key is still at `expected` (0: absent).
    pub async fn write(
        &self,
        info: &ApprovalInfo,
        expected: i64,
    ) -> Result<Written, ApprovalError> {
        let key = self.key(&info.approval_id);
        let guard = if expected == 0 {
            Compare::create_revision(key.clone(), CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key.clone(), CompareOp::Equal, expected)
        };
        let response = self
            .client
            .clone()
            .txn(
                Txn::new()
                    .when([guard])
                    .and_then([TxnOp::put(key.clone(), info.encode_to_vec(), None)])
                    .or_else([TxnOp::get(key, None)]),
            )
            .await
            .map_err(unavailable)?;
        if response.succeeded() {
            return Ok(Written::At(response.header().map_or(0, |h| h.revision())));
        }
        let current = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().and_then(Self::decode).map(Box::new),
            _ => None,
        });
        Ok(Written::Conflict(current))
    }

    /// Forgets approval `id` (decided long ago).
    pub async fn delete(&self, id: &str) {
        if let Err(error) = self.client.clone().delete(self.key(id), None).await {
            warn!(approval_id = %id, %error, "an old approval could not be removed from etcd; the next trim tries again");
        }
    }
}

/// Keeps `book`'s mirror up to date from the revision after `from`, until
/// the book is dropped: a broken watch is reloaded and followed again.
pub async fn follow(store: EtcdApprovals, book: Weak<ApprovalBook>, mut from: i64) {
    let mut backoff =
        spear_common::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        match watch(&store, &book, from).await {
            Ok(()) => return,
            Err(error) => warn!(%error, "lost the approvals watch on etcd; reloading"),
        }
        backoff.sleep().await;
        match store.load().await {
            Ok((stored, revision)) => {
                let Some(book) = book.upgrade() else { return };
                book.mirror_all(stored);
                from = revision;
                backoff.reset();
            }
            Err(error) => warn!(%error, "the approvals could not be reloaded from etcd"),
        }
    }
}

/// Applies every change after `from`; `Ok` when the book is gone.
async fn watch(
    store: &EtcdApprovals,
    book: &Weak<ApprovalBook>,
    from: i64,
) -> Result<(), ApprovalError> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(from + 1);
    let mut stream = store
        .client
        .clone()
        .watch(store.prefix.clone(), Some(options))
        .await
        .map_err(unavailable)?;
    loop {
        let response = match stream.message().await {
            Ok(Some(response)) => response,
            Ok(None) => return Err(ApprovalError::Unavailable("etcd closed the watch".into())),
            Err(error) => return Err(unavailable(error)),
        };
        if response.canceled() {
            return Err(ApprovalError::Unavailable(format!(
                "etcd canceled the watch: {}",
                response.cancel_reason()
            )));
        }
        let Some(book) = book.upgrade() else {
            return Ok(());
        };
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            match event.event_type() {
                EventType::Put => {
                    if let Some((info, revision)) = EtcdApprovals::decode(kv) {
                        book.mirror(info, revision);
                    }
                }
                EventType::Delete => {
                    let key = String::from_utf8_lossy(kv.key());
                    if let Some(id) = key.strip_prefix(store.prefix.as_str()) {
                        book.forget(id);
                    }
                }
            }
        }
    }
}

/// A book on etcd: loaded, and followed until it is dropped.
pub async fn book(store: EtcdApprovals) -> Result<Arc<ApprovalBook>, ApprovalError> {
    let (stored, revision) = store.load().await?;
    let book = Arc::new(ApprovalBook::on(Some(store.clone())));
    book.mirror_all(stored);
    tokio::spawn(follow(store, Arc::downgrade(&book), revision));
    Ok(book)
}
