//! A node whose audit directory is empty at start (wiped, a new disk, a
//! restored image) asks SMS where its chain stands, and goes on from
//! there with a `reset` record, instead of starting again at seq 1: SMS
//! would refuse records 1, 2, … as conflicts with the ones it holds, and
//! the node's new records would reach no one.
//!
//! Entry point: [`open`]. A brand-new node gets "no record" and
//! starts at 1; a node that cannot reach SMS within [`ASK_WITHIN`] starts
//! at 1 too, and SMS names the clash as conflicts when it ships.

use std::path::Path;
use std::time::Duration;

use spear_proto::audit::{Kind, Outcome, Record};
use spear_proto::v1::{LastAuditRequest, LastAuditResponse};
use tracing::{info, warn};

use super::files;
use super::log::{AuditLog, OpenError, ResumeFrom, ROTATE_BYTES};
use super::unreached::Unreached;
use crate::sms_link::SmsLink;

/// How long a start waits for SMS's answer.
pub const ASK_WITHIN: Duration = Duration::from_secs(3);

/// Opens the node's audit log in `dir`: going on from its own last
/// record, or, when it has none, from SMS's, with a `reset` record first.
pub async fn open(sms: &SmsLink, node: &str, dir: &Path) -> Result<AuditLog, OpenError> {
    let resume = from_sms(sms, node, dir).await;
    let log = AuditLog::open_resuming(dir, node, ROTATE_BYTES, resume.as_ref())?;
    if let Some(from) = &resume {
        log.append(reset_record(from));
    }
    Ok(log)
}

/// SMS's last record of `node`, when `dir` holds none.
async fn from_sms(sms: &SmsLink, node: &str, dir: &Path) -> Option<ResumeFrom> {
    let empty = files::tail(dir).map(|t| t.seq == 0).unwrap_or(true);
    if !empty {
        return None;
    }
    match tokio::time::timeout(ASK_WITHIN, ask(sms, node)).await {
        Ok(Ok(found)) => found,
        Ok(Err(why)) => {
            warn!(%why, "the audit log is empty and SMS could not say where this node's chain stands; starting at seq 1 (SMS will name the clash if it holds records of this node)");
            None
        }
        Err(_) => {
            warn!("the audit log is empty and SMS did not answer within {ASK_WITHIN:?}; starting at seq 1 (SMS will name the clash if it holds records of this node)");
            None
        }
    }
}

async fn ask(sms: &SmsLink, node: &str) -> Result<Option<ResumeFrom>, Unreached> {
    let mut last_error = Unreached::NoAddress;
    for addr in sms.candidates() {
        let channel = match sms.connect(&addr).await {
            Ok(channel) => channel,
            Err(e) => {
                last_error = e.into();
                continue;
            }
        };
        let request = LastAuditRequest {
            node_id: node.to_string(),
        };
        match sms.audit_over(channel).last_audit(request).await {
            Ok(answer) => {
                let LastAuditResponse { seq, hash } = answer.into_inner();
                if seq == 0 {
                    return Ok(None);
                }
                info!(
                    seq,
                    "the audit log is empty; going on from the last record SMS holds of this node"
                );
                return Ok(Some(ResumeFrom { seq, hash }));
            }
            Err(status) => last_error = status.into(),
        }
    }
    Err(last_error)
}

/// The record that says so, first of the resumed chain.
fn reset_record(from: &ResumeFrom) -> Record {
    Record {
        kind: Kind::Reset,
        outcome: Outcome::Run,
        rule: format!(
            "the node's audit log was empty at start; this chain goes on from record {} at SMS (records written before, if any, are only in SMS's copy)",
            from.seq
        ),
        ..Record::default()
    }
}
