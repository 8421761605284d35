//! Why SMS refuses an approval request, decision or claim: one sentence each, naming the approval.

use super::{MAX_APPROVALS, MAX_ARGUMENTS, MAX_PENDING_PER_NODE, MAX_PENDING_PER_TASK};

/// Why a request, decision or claim is refused; each names the approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval '{0}' (it may have been decided more than an hour ago); `sms approvals list` shows the current ones")]
    Unknown(String),
    #[error("the approval request is missing its {0}")]
    Missing(&'static str),
    #[error("the arguments the approval would show do not hash to the digest it binds; an operator would approve one call and the node run another")]
    ShownNotBound,
    #[error("the call's arguments are {0} bytes, over the {MAX_ARGUMENTS} an approval keeps")]
    LargeArguments(usize),
    #[error("node '{0}' already has {MAX_PENDING_PER_NODE} approvals pending; decide or let some expire first")]
    TooManyForNode(String),
    #[error("task '{0}' already has {MAX_PENDING_PER_TASK} approvals pending across its nodes; decide or let some expire first")]
    TooManyForTask(String),
    #[error("SMS holds {MAX_APPROVALS} approvals; decide or let some expire first")]
    TooMany,
    #[error("approval '{id}' belongs to node '{owner}'")]
    OtherNode { id: String, owner: String },
    #[error("approval '{id}' is {state}, so it cannot be {action}")]
    NotPending {
        id: String,
        state: &'static str,
        action: &'static str,
    },
    #[error("approval '{id}' was for another call: its {field} differs, so this call needs its own approval")]
    OtherCall { id: String, field: &'static str },
    #[error("the approvals store is unavailable: {0}")]
    Unavailable(String),
    #[error("approval '{0}' kept changing under this decision; try again")]
    Contended(String),
}
