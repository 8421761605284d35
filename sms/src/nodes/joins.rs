//! Join tokens spent at this SMS, so each works once
//! (docs/security.md, "Node credentials"). A token checks against SMS's
//! secret alone ([`spear_identity::NodeTokens`]); what makes it single
//! use is its nonce remembered here until the token would have expired:
//! in etcd when SMS is (every replica refuses a second use), in this
//! replica's memory otherwise (a restart forgets them; the token's short
//! life bounds what that allows, see the docs).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use spear_identity::JoinClaim;

use super::SharedNodes;

/// The most spent tokens one replica remembers in memory; beyond it the
/// soonest to expire are dropped first (a flood of joins is refused by
/// the tokens' macs long before it gets here).
const MAX_REMEMBERED: usize = 100_000;

/// Where spent nonces are kept.
#[derive(Default)]
pub struct SpentJoins {
    memory: Mutex<HashMap<String, u64>>,
    shared: Option<Arc<SharedNodes>>,
}

/// The spent list cannot be reached (etcd down): the join is refused, to
/// be tried again.
#[derive(Debug, thiserror::Error)]
#[error("SMS cannot check whether the join token was used before ({0}); try again")]
pub struct Unreachable(String);

impl SpentJoins {
    pub fn new(shared: Option<Arc<SharedNodes>>) -> Self {
        Self {
            memory: Mutex::default(),
            shared,
        }
    }

    /// Spends `claim`'s token at `now_unix`. `true`: its first use.
    pub async fn spend(&self, claim: &JoinClaim, now_unix: u64) -> Result<bool, Unreachable> {
        let ttl = claim.expires_unix.saturating_sub(now_unix);
        if let Some(shared) = &self.shared {
            return shared
                .spend_join(&claim.nonce, i64::try_from(ttl).unwrap_or(i64::MAX))
                .await
                .map_err(|e| Unreachable(e.to_string()));
        }
        let mut memory = self.memory.lock();
        memory.retain(|_, expires| *expires > now_unix);
        if memory.contains_key(&claim.nonce) {
            return Ok(false);
        }
        if memory.len() >= MAX_REMEMBERED {
            if let Some(soonest) = memory
                .iter()
                .min_by_key(|(_, expires)| **expires)
                .map(|(nonce, _)| nonce.clone())
            {
                memory.remove(&soonest);
            }
        }
        memory.insert(claim.nonce.clone(), claim.expires_unix);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_is_spent_once_and_forgotten_after_it_expires() {
        let spent = SpentJoins::default();
        let claim = JoinClaim {
            node_id: "node-a".into(),
            expires_unix: 100,
            nonce: "n1".into(),
        };
        assert!(spent.spend(&claim, 10).await.unwrap_or(false));
        assert!(!spent.spend(&claim, 11).await.unwrap_or(true));
        // Past its expiry the token itself is refused; the nonce can go.
        assert!(spent.spend(&claim, 100).await.unwrap_or(false));
    }
}
