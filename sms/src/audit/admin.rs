//! Admin writes to SMS as audit records, in SMS's own chain: who did what
//! to which server, task, credential, certificate, pin or approval, and
//! whether it took. Entry point: [`AdminAudit::record`], awaited by each
//! write handler with its result.
//!
//! The chain is `sms` for an SMS in memory, and `sms:<host>` for a
//! replica on etcd (each replica its own chain, continued after a
//! restart from the last record etcd holds of it). Nodes cannot ship
//! under these names ([`is_sms_chain`]).

use std::sync::Arc;

use spear_proto::audit::{Kind, Outcome, Record};
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{AuditEvent, AuditLine};
use tokio::sync::Mutex;
use tonic::Status;
use tracing::warn;

use super::AuditStore;
use crate::events::TrustEvents;

/// Whether `node` names an SMS chain, which only SMS writes.
pub fn is_sms_chain(node: &str) -> bool {
    node == "sms" || node.starts_with("sms:")
}

/// Records admin writes; a default one records nothing (unit tests).
#[derive(Clone, Default)]
pub struct AdminAudit {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    store: Arc<AuditStore>,
    events: TrustEvents,
    chain: String,
    /// The chain's last seq and hash (`None` until read from the store):
    /// held across the write, so records are sealed in order.
    last: Mutex<Option<(u64, String)>>,
}

impl AdminAudit {
    pub fn new(store: Arc<AuditStore>, events: TrustEvents) -> Self {
        let chain = match &*store {
            AuditStore::Memory(_) => "sms".to_string(),
            AuditStore::Etcd(_) => format!("sms:{}", host()),
        };
        Self {
            inner: Some(Arc::new(Inner {
                store,
                events,
                chain,
                last: Mutex::new(None),
            })),
        }
    }

    /// Records that `caller` did `action` to `target`, with `result`.
    pub async fn record<T>(
        &self,
        caller: &impl std::fmt::Display,
        action: &str,
        target: &str,
        result: &Result<T, Status>,
    ) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut record = Record {
            node: inner.chain.clone(),
            time_ms: super::now_ms(),
            kind: Kind::Admin,
            outcome: if result.is_ok() {
                Outcome::Run
            } else {
                Outcome::Failed
            },
            identity: caller.to_string(),
            action: action.to_string(),
            target: spear_common::text::prefix(target, 256).to_string(),
            rule: match result {
                Ok(_) => String::new(),
                Err(status) => spear_common::text::prefix(status.message(), 512).to_string(),
            },
            ..Record::default()
        };
        let mut last = inner.last.lock().await;
        if last.is_none() {
            match inner.store.last_of(&inner.chain).await {
                Ok(found) => *last = Some(continued(found)),
                Err(error) => {
                    warn!(%error, action, "an admin write is not in the audit trail: its store is unavailable");
                    return;
                }
            }
        }
        let (seq, prev) = last.clone().unwrap_or_default();
        let json = record.seal(seq + 1, &prev);
        let line = AuditLine { seq: seq + 1, json };
        match inner.store.ship(&inner.chain, vec![line]).await {
            Ok(shipped) => {
                *last = Some((seq + 1, record.hash));
                for line in shipped.new {
                    super::export(&inner.chain, &line);
                    inner.events.publish(Event::Audit(AuditEvent {
                        node_id: inner.chain.clone(),
                        record: Some(line),
                    }));
                }
            }
            Err(error) => {
                warn!(%error, action, "an admin write is not in the audit trail: its store is unavailable");
                // Read the chain's end again next time.
                *last = None;
            }
        }
    }
}

/// Where a chain goes on from: its last record's seq and hash.
fn continued(last: Option<AuditLine>) -> (u64, String) {
    match last {
        Some(line) => {
            let hash = serde_json::from_str::<Record>(&line.json)
                .map(|r| r.hash)
                .unwrap_or_default();
            (line.seq, hash)
        }
        None => (0, String::new()),
    }
}

/// This replica's host name (a pod's name on Kubernetes).
fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "replica".into())
}
