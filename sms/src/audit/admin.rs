//! Admin writes to SMS as audit records, in SMS's own chain (node name
//! [`SMS_CHAIN`]): who did what to which server, task, credential,
//! certificate, pin or approval, and whether it took. Entry point:
//! [`AdminAudit::record`], called by each write handler with its result.

use std::sync::Arc;

use parking_lot::Mutex;
use spear_proto::audit::{Kind, Outcome, Record};
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{AuditEvent, AuditLine};
use tonic::Status;

use super::AuditBook;
use crate::events::TrustEvents;

/// The chain SMS's own records are kept under.
pub const SMS_CHAIN: &str = "sms";

/// Records admin writes; a default one records nothing (unit tests).
#[derive(Clone, Default)]
pub struct AdminAudit {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    book: Arc<AuditBook>,
    events: TrustEvents,
    /// The last seq and hash of SMS's chain: sealing is in order.
    last: Mutex<(u64, String)>,
}

impl AdminAudit {
    pub fn new(book: Arc<AuditBook>, events: TrustEvents) -> Self {
        Self {
            inner: Some(Arc::new(Inner {
                book,
                events,
                last: Mutex::new((0, String::new())),
            })),
        }
    }

    /// Records that `caller` did `action` to `target`, with `result`.
    pub fn record<T>(
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
            node: SMS_CHAIN.to_string(),
            time_ms: super::now_ms(),
            kind: Kind::Admin,
            outcome: if result.is_ok() { Outcome::Run } else { Outcome::Failed },
            identity: caller.to_string(),
            action: action.to_string(),
            target: spear_common::text::prefix(target, 256).to_string(),
            rule: match result {
                Ok(_) => String::new(),
                Err(status) => spear_common::text::prefix(status.message(), 512).to_string(),
            },
            ..Record::default()
        };
        let line = {
            let mut last = inner.last.lock();
            let seq = last.0 + 1;
            let json = record.seal(seq, &last.1);
            *last = (seq, record.hash.clone());
            AuditLine { seq, json }
        };
        if let Ok(shipped) = inner.book.ship(SMS_CHAIN, vec![line]) {
            for line in shipped.new {
                super::export(SMS_CHAIN, &line);
                inner.events.publish(Event::Audit(AuditEvent {
                    node_id: SMS_CHAIN.to_string(),
                    record: Some(line),
                }));
            }
        }
    }
}
