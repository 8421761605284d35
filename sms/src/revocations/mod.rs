//! Revoked certificates at SMS (`sms certs revoke`). The list lives in the
//! store ([`RevocationStore`]: in memory, or in etcd shared by every
//! replica); [`Revocations::start`] re-reads it every [`FOLLOW_EVERY`] into
//! the [`DenyList`] SMS's ports consult before reading a request, and into
//! the list nodes follow over `Revocations.Watch`. A revocation therefore
//! takes effect at every replica and node within about a second, without
//! a new CA.

mod etcd;
mod memory;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use spear_identity::{DenyList, Revoked};
use spear_proto::v1::revocation::Target;
use spear_proto::v1::Revocation;
use tokio::sync::watch;
use tracing::warn;

pub use etcd::EtcdRevocations;
pub use memory::MemoryRevocations;

/// How often each replica re-reads the store's list.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Why the list cannot be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum RevocationError {
    #[error("the revocation list cannot be reached: {0}")]
    Unavailable(String),
    #[error("a revocation names an identity (node/<id>, admin/<name>, sms) or a serial number in hex; '{0}' is neither")]
    BadTarget(String),
}

/// Where the list is kept.
#[async_trait]
pub trait RevocationStore: Send + Sync {
    async fn list(&self) -> Result<Vec<Revocation>, RevocationError>;
    /// Adds `revocation` under `key`; false when the key was there.
    async fn add(&self, key: &str, revocation: Revocation) -> Result<bool, RevocationError>;
}

/// The revocation's target in the form the [`DenyList`] compares.
pub fn target(revocation: &Revocation) -> Result<Revoked, RevocationError> {
    let (identity, serial) = match &revocation.target {
        Some(Target::Identity(identity)) => (Some(identity.as_str()), None),
        Some(Target::Serial(serial)) => (None, Some(serial.as_str())),
        None => return Err(RevocationError::BadTarget(String::new())),
    };
    Revoked::from_wire(identity, serial)
        .ok_or_else(|| RevocationError::BadTarget(identity.or(serial).unwrap_or("").to_string()))
}

/// One key per target, whatever its spelling.
fn key_of(target: &Revoked) -> String {
    match target {
        Revoked::Identity(identity) => format!("identity/{identity}"),
        Revoked::Serial(serial) => format!("serial/{serial}"),
    }
}

/// SMS's view of the list: the store, the deny list its ports consult and
/// the list it sends nodes.
pub struct Revocations {
    store: Arc<dyn RevocationStore>,
    deny: DenyList,
    list: watch::Sender<Arc<Vec<Revocation>>>,
}

impl Revocations {
    /// Reads the list once (a store that cannot be read is not fatal: the
    /// follower keeps trying) and follows it until every handle is gone.
    pub async fn start(store: Arc<dyn RevocationStore>) -> Arc<Revocations> {
        let this = Arc::new(Revocations {
            store,
            deny: DenyList::default(),
            list: watch::Sender::new(Arc::default()),
        });
        this.refresh().await;
        let weak = Arc::downgrade(&this);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(FOLLOW_EVERY).await;
                let Some(this) = weak.upgrade() else { return };
                this.refresh().await;
            }
        });
        this
    }

    /// The deny list SMS's ports share.
    pub fn deny_list(&self) -> DenyList {
        self.deny.clone()
    }

    /// The list as nodes receive it, now and after each change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Vec<Revocation>>> {
        self.list.subscribe()
    }

    /// Records a revocation and applies it at once on this replica.
    pub async fn revoke(&self, mut revocation: Revocation) -> Result<bool, RevocationError> {
        let target = target(&revocation)?;
        // Stored in the one spelling the deny list compares.
        revocation.target = Some(match &target {
            Revoked::Identity(identity) => Target::Identity(identity.to_string()),
            Revoked::Serial(serial) => Target::Serial(serial.clone()),
        });
        revocation.revoked_at_ms = spear_common::clock::now_ms();
        let added = self.store.add(&key_of(&target), revocation).await?;
        self.refresh().await;
        Ok(added)
    }

    async fn refresh(&self) {
        let mut list = match self.store.list().await {
            Ok(list) => list,
            Err(error) => {
                warn!(%error, "the revocation list was not re-read; the last one read stays in force");
                return;
            }
        };
        list.sort_by_key(|r| r.revoked_at_ms);
        let targets: Vec<Revoked> = list.iter().filter_map(|r| target(r).ok()).collect();
        self.deny.replace(targets);
        self.list.send_if_modified(|current| {
            if **current == list {
                return false;
            }
            *current = Arc::new(list);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spear_identity::Identity;

    #[tokio::test]
    async fn a_revocation_is_refused_at_once_and_recorded_once() {
        let revocations = Revocations::start(Arc::new(MemoryRevocations::default())).await;
        let deny = revocations.deny_list();
        let node = Identity::Node("stolen".into());
        assert!(!deny.refuses(&node, None));
        let revoke = |target| Revocation {
            target: Some(target),
            reason: "laptop lost".into(),
            revoked_at_ms: 0,
        };
        assert!(revocations
            .revoke(revoke(Target::Identity("node/stolen".into())))
            .await
            .unwrap());
        assert!(deny.refuses(&node, None));
        assert!(!revocations
            .revoke(revoke(Target::Identity("node/stolen".into())))
            .await
            .unwrap());
        assert!(revocations
            .revoke(revoke(Target::Serial("0A:FF".into())))
            .await
            .unwrap());
        assert!(deny.refuses(&Identity::Admin("x".into()), Some("0aff")));
        let list = revocations.subscribe().borrow().clone();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].target, Some(Target::Serial("0aff".into())));
        assert!(list.iter().all(|r| r.revoked_at_ms > 0));

        let error = revocations
            .revoke(revoke(Target::Identity("node/".into())))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("'node/' is neither"), "{error}");
    }
}
