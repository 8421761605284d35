//! Approvals bound to one call, the node's side: ask SMS, wait for a
//! person's decision without holding a thread, claim it once. The flow
//! around a call is `tools/approval.rs`.

use std::time::Duration;

use spear_proto::v1::{
    ApprovalBinding, ApprovalState, AwaitApprovalRequest, ClaimApprovalRequest,
    RequestApprovalRequest,
};

use tracing::warn;

use crate::sms_link::SmsLink;

/// How long one wait asks SMS to hold the answer.
const WAIT: Duration = Duration::from_secs(25);
/// How soon, and at most how long after, a wait asks again while SMS is
/// away.
const AWAY_FIRST: Duration = Duration::from_millis(250);
const AWAY_MAX: Duration = Duration::from_secs(5);

/// Whether `status` says SMS could not be reached (or went away mid-call),
/// rather than that it answered.
fn away(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    )
}

/// Why SMS could not be asked, or refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ApprovalFailed(pub String);

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub state: ApprovalState,
    pub reason: String,
    pub decided_by: String,
}

/// Talks to the SMS the node follows.
#[derive(Clone)]
pub struct Approver {
    sms: SmsLink,
}

impl Approver {
    pub fn new(sms: SmsLink) -> Self {
        Self { sms }
    }

    /// A pending approval for `binding`; its id.
    pub async fn request(
        &self,
        binding: ApprovalBinding,
        arguments: String,
        expires_in: Duration,
    ) -> Result<String, ApprovalFailed> {
        let mut client = self
            .sms
            .approvals()
            .map_err(|e| ApprovalFailed(e.to_string()))?;
        let answer = client
            .request_approval(RequestApprovalRequest {
                binding: Some(binding),
                arguments,
                expires_in_ms: expires_in.as_millis() as u64,
            })
            .await
            .map_err(|s| ApprovalFailed(s.message().to_string()))?;
        Ok(answer.into_inner().approval_id)
    }

    /// Waits until approval `id` is decided or expires. SMS may be away
    /// meanwhile (a replica restarting, the node moving to another): the
    /// wait asks again, as approvals outlive a replica on etcd; the run's
    /// deadline bounds it.
    pub async fn wait(&self, node_id: &str, id: &str) -> Result<Decided, ApprovalFailed> {
        let mut backoff = spear_common::backoff::Backoff::new(AWAY_FIRST, AWAY_MAX);
        loop {
            let asked = match self.sms.approvals() {
                Ok(mut client) => client
                    .await_approval(AwaitApprovalRequest {
                        node_id: node_id.to_string(),
                        approval_id: id.to_string(),
                        wait_ms: WAIT.as_millis() as u64,
                    })
                    .await
                    .map(tonic::Response::into_inner),
                Err(e) => Err(tonic::Status::unavailable(e.to_string())),
            };
            let answer = match asked {
                Ok(answer) => answer,
                Err(status) if away(&status) => {
                    warn!(approval_id = %id, why = %status.message(), "SMS is away while a call waits for its approval; asking again");
                    backoff.sleep().await;
                    continue;
                }
                Err(status) => return Err(ApprovalFailed(status.message().to_string())),
            };
            backoff.reset();
            if answer.state() != ApprovalState::Pending {
                return Ok(Decided {
                    state: answer.state(),
                    reason: answer.reason,
                    decided_by: answer.decided_by,
                });
            }
        }
    }

    /// Uses approved approval `id` for the call `binding` describes.
    pub async fn claim(&self, id: &str, binding: ApprovalBinding) -> Result<(), ApprovalFailed> {
        let mut client = self
            .sms
            .approvals()
            .map_err(|e| ApprovalFailed(e.to_string()))?;
        client
            .claim_approval(ClaimApprovalRequest {
                approval_id: id.to_string(),
                binding: Some(binding),
            })
            .await
            .map_err(|s| ApprovalFailed(s.message().to_string()))?;
        Ok(())
    }
}
