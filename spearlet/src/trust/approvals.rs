//! Approvals bound to one call, the node's side: ask SMS, wait for a
//! person's decision without holding a thread, claim it once. The flow
//! around a call is `tools/approval.rs`.

use std::time::Duration;

use spear_proto::v1::{
    ApprovalBinding, ApprovalState, AwaitApprovalRequest, ClaimApprovalRequest,
    RequestApprovalRequest,
};

use crate::sms_link::SmsLink;

/// How long one wait asks SMS to hold the answer.
const WAIT: Duration = Duration::from_secs(25);

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

    /// Waits until approval `id` is decided or expires.
    pub async fn wait(&self, node_id: &str, id: &str) -> Result<Decided, ApprovalFailed> {
        loop {
            let mut client = self
                .sms
                .approvals()
                .map_err(|e| ApprovalFailed(e.to_string()))?;
            let answer = client
                .await_approval(AwaitApprovalRequest {
                    node_id: node_id.to_string(),
                    approval_id: id.to_string(),
                    wait_ms: WAIT.as_millis() as u64,
                })
                .await
                .map_err(|s| ApprovalFailed(s.message().to_string()))?
                .into_inner();
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
