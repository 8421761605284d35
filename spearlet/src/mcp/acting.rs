//! For whom a call is made, on servers that act per principal (their file's
//! grant is `token_exchange`): the run's person, and the delegation SMS
//! sealed into the run. The node cannot read a delegation; it hands it
//! back to SMS with each token request, and SMS answers with that person's
//! token (or, without one, the node's own). A person's calls go over a
//! session of their own, whose token source holds the delegation of their
//! latest run ([`Delegation`]).

use std::sync::Arc;

use bytes::Bytes;

/// The run's person and their sealed delegation. `Debug` shows neither
/// the delegation nor its length.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OnBehalf {
    /// `<issuer>#<subject>`.
    pub principal: String,
    pub delegation: Bytes,
}

impl std::fmt::Debug for OnBehalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnBehalf")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl OnBehalf {
    /// The run's person, with what SMS delegated to the run (maybe
    /// nothing); `None` for a run no person invoked.
    pub fn of_run(principal: &spear_proto::v1::Principal, delegation: Bytes) -> Option<OnBehalf> {
        (principal.kind == spear_proto::principal::PERSON).then(|| OnBehalf {
            principal: principal.label(),
            delegation,
        })
    }
}

/// The delegation a person's session presents: their latest run's, set
/// before each of its calls.
pub type Delegation = Arc<parking_lot::Mutex<Bytes>>;
