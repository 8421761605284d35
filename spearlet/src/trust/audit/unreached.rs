//! Why an exchange with SMS about the audit trail did not happen: the
//! shipper's batch (`ship.rs`) or the question where a chain stands
//! (`resume.rs`). Each is logged and tried again; none stops the node.

use crate::sms_link::LinkError;

#[derive(Debug, thiserror::Error)]
pub enum Unreached {
    #[error("cannot read the audit log: {0}")]
    Read(#[from] std::io::Error),
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("SMS answered: {0}")]
    Answered(String),
    #[error("no complete record past the last shipped")]
    NothingPast,
    #[error("no SMS address")]
    NoAddress,
}

impl From<tonic::Status> for Unreached {
    fn from(status: tonic::Status) -> Self {
        Unreached::Answered(status.message().to_string())
    }
}
