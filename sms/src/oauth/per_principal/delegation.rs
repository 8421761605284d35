//! A run's delegation: the invoking person's token, sealed by SMS into the
//! invocation it sends a node, for that node and the run's time only. The
//! node cannot read it; it hands it back when the run calls a server that
//! acts per principal, and whichever replica it asks opens it (replicas
//! share the sealing key), checks it was sealed for that node and is still
//! current, and acts for the person. A delegation copied to another node,
//! replayed after the run, or altered does not open or is refused.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::seal::SealingKey;

/// The associated data every delegation is sealed with: bytes sealed for
/// anything else (a credential, a server's value) never open as one.
const OWNER: &str = "spear: a run's delegation";

/// What a delegation holds. `Debug` does not show the token.
#[derive(Clone, Serialize, Deserialize)]
pub struct Delegation {
    /// The node the run was sent to.
    pub node_id: String,
    /// `<issuer>#<subject>`: whose token it is.
    pub principal: String,
    pub subject_token: String,
    /// Unix milliseconds after which the run is over.
    pub until_ms: u64,
}

impl std::fmt::Debug for Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation")
            .field("node_id", &self.node_id)
            .field("principal", &self.principal)
            .field("until_ms", &self.until_ms)
            .finish_non_exhaustive()
    }
}

/// Why a node's delegation is not honoured.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    #[error("the run's delegation does not open with SMS's key: it was altered, or sealed by another installation")]
    Unopenable,
    #[error("the run's delegation was sealed for node '{sealed_for}', not '{caller}': a node acts only for the runs SMS sent it")]
    OtherNode { sealed_for: String, caller: String },
    #[error("the run this delegation was for has ended; invoke the task again")]
    Ended,
    #[error("this machine gave no randomness to seal the delegation with")]
    NoRandomness,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Delegation {
    /// A delegation of `principal`'s `token` to `node_id` for `lasting`.
    pub fn new(node_id: &str, principal: &str, token: &str, lasting: Duration) -> Delegation {
        Delegation {
            node_id: node_id.to_string(),
            principal: principal.to_string(),
            subject_token: token.to_string(),
            until_ms: now_ms() + lasting.as_millis() as u64,
        }
    }

    pub fn seal(&self, key: &SealingKey) -> Result<Vec<u8>, DelegationError> {
        let plain = serde_json::to_vec(self).map_err(|_| DelegationError::Unopenable)?;
        key.seal(OWNER, &plain)
            .map_err(|_| DelegationError::NoRandomness)
    }

    /// The delegation in `sealed`, if `caller` (a node) may act on it now.
    pub fn open(
        key: &SealingKey,
        sealed: &[u8],
        caller: &str,
    ) -> Result<Delegation, DelegationError> {
        let plain = key
            .open(OWNER, sealed)
            .map_err(|_| DelegationError::Unopenable)?;
        let delegation: Delegation =
            serde_json::from_slice(&plain).map_err(|_| DelegationError::Unopenable)?;
        if delegation.node_id != caller {
            return Err(DelegationError::OtherNode {
                sealed_for: delegation.node_id,
                caller: caller.to_string(),
            });
        }
        if delegation.until_ms <= now_ms() {
            return Err(DelegationError::Ended);
        }
        Ok(delegation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_node_it_was_sealed_for_opens_it_and_only_during_the_run() {
        let key = SealingKey::ephemeral().unwrap();
        let sealed = Delegation::new(
            "node-a",
            "https://idp#alice",
            "id-token",
            Duration::from_secs(60),
        )
        .seal(&key)
        .unwrap();
        let opened = Delegation::open(&key, &sealed, "node-a").unwrap();
        assert_eq!(opened.principal, "https://idp#alice");
        assert_eq!(opened.subject_token, "id-token");
        assert!(!format!("{opened:?}").contains("id-token"));
        // Copied to another node.
        let error = Delegation::open(&key, &sealed, "node-b").unwrap_err();
        assert!(
            matches!(error, DelegationError::OtherNode { .. }),
            "{error}"
        );
        // Altered.
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(matches!(
            Delegation::open(&key, &altered, "node-a"),
            Err(DelegationError::Unopenable)
        ));
        // Another installation's key.
        let other = SealingKey::ephemeral().unwrap();
        assert!(matches!(
            Delegation::open(&other, &sealed, "node-a"),
            Err(DelegationError::Unopenable)
        ));
        // After the run.
        let ended = Delegation::new("node-a", "p", "t", Duration::ZERO)
            .seal(&key)
            .unwrap();
        assert!(matches!(
            Delegation::open(&key, &ended, "node-a"),
            Err(DelegationError::Ended)
        ));
    }
}
