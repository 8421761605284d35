//! Where SMS keeps the audit trail: in its memory, or in etcd next to the
//! registry when SMS is on etcd (shared by replicas, kept across
//! restarts). Entry point: [`AuditStore`].

use spear_proto::v1::{AuditLine, ChainReport, QueryAuditRequest};

use super::etcd::EtcdAudit;
use super::resolve::Resolved;
use super::{AuditBook, AuditError, Shipped};

pub enum AuditStore {
    Memory(AuditBook),
    Etcd(EtcdAudit),
}

impl AuditStore {
    /// Keeps `node`'s records it does not have yet.
    pub async fn ship(&self, node: &str, lines: Vec<AuditLine>) -> Result<Shipped, AuditError> {
        match self {
            AuditStore::Memory(book) => book.ship(node, lines),
            AuditStore::Etcd(etcd) => etcd.ship(node, lines).await,
        }
    }

    /// The records matching `filter` with each one's node, and how many
    /// more matched.
    pub async fn query(
        &self,
        filter: &QueryAuditRequest,
    ) -> Result<(Vec<super::Found>, u64), AuditError> {
        match self {
            AuditStore::Memory(book) => Ok(book.query(filter)),
            AuditStore::Etcd(etcd) => Ok(etcd.load().await?.query(filter)),
        }
    }

    /// What the records `filter` matches add up to.
    pub async fn usage(
        &self,
        filter: &spear_proto::v1::UsageRequest,
    ) -> Result<spear_proto::v1::UsageResponse, AuditError> {
        match self {
            AuditStore::Memory(book) => Ok(book.usage(filter)),
            AuditStore::Etcd(etcd) => Ok(etcd.load().await?.usage(filter)),
        }
    }

    /// Every chain's report.
    pub async fn verify(&self) -> Result<Vec<ChainReport>, AuditError> {
        match self {
            AuditStore::Memory(book) => Ok(book.verify()),
            AuditStore::Etcd(etcd) => Ok(etcd.load().await?.verify()),
        }
    }

    /// The last record kept of `node`'s chain.
    pub async fn last_of(&self, node: &str) -> Result<Option<AuditLine>, AuditError> {
        match self {
            AuditStore::Memory(book) => Ok(book.last_of(node)),
            AuditStore::Etcd(etcd) => etcd.last_of(node).await,
        }
    }

    /// Ends the dispute over `node`'s `seq`, keeping the copy `keep`
    /// names (its SHA-256).
    pub async fn resolve(&self, node: &str, seq: u64, keep: &str) -> Result<Resolved, AuditError> {
        match self {
            AuditStore::Memory(book) => book.resolve(node, seq, keep),
            AuditStore::Etcd(etcd) => etcd.resolve(node, seq, keep).await,
        }
    }
}
