//! Tokens for servers that act per principal (`"grant": "token_exchange"`).
//! Entry point: [`PerPrincipal::token`], for a node's request:
//!
//! 1. with the run's delegation ([`Delegation`]), opened for that node: the
//!    person's token is exchanged (RFC 8693) at the server's authorization
//!    server, the node's workload JWT as actor, for a token whose `sub` is
//!    the person and whose `act` is the node;
//! 2. without one (a run no person invoked): the node's own workload JWT
//!    buys a token (RFC 7523 JWT bearer), `sub` = the node.
//!
//! Tokens are cached per (principal and acting node, server, audience) and
//! handed out only to a request for the same; a token the server refused is not
//! handed out again. A refusal is the person's sentence, never another
//! principal's token or a shared one.

mod delegation;
mod workload;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use spear_oauth::{token_digest, ClientConfig, Granted, OAuthError, Subject};

pub use delegation::{Delegation, DelegationError};
pub use workload::{WorkloadError, WorkloadIssuer};

use super::Issued;
use crate::seal::SealingKey;

/// How long a token whose lifetime the authorization server did not say
/// is handed out before it is bought again.
const UNSAID_LIFETIME: Duration = Duration::from_secs(300);
/// A token request's limit; the node's own wait is longer.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);

/// Why no token is given: one sentence, for the run's tool result.
#[derive(Debug, thiserror::Error)]
pub enum PerPrincipalError {
    #[error(transparent)]
    Delegation(#[from] DelegationError),
    #[error("SMS seals no delegations: it has no sealing key; give it --oauth-key-file FILE (make one with `sms oauth keygen FILE`)")]
    NoKey,
    #[error("{principal} has no credential for server '{server}': {why}; they connect their account for '{server}' at its authorization server (or its admin grants it), then invoke again")]
    NotConnected {
        principal: String,
        server: String,
        why: String,
    },
    #[error("node '{node}' has no workload credential for server '{server}': {why}")]
    NoWorkload {
        node: String,
        server: String,
        why: String,
    },
    #[error("could not get a token for server '{server}': {why}")]
    Unreachable { server: String, why: String },
    #[error("{principal} has no login for server '{server}' ({why}); they connect their account (`sms oauth login {server} --principal-token '${{ID_TOKEN}}'`), then invoke again")]
    NotLoggedIn {
        principal: String,
        server: String,
        why: String,
    },
    #[error("server '{0}' acts with each person's own login, and this run has no person (nobody invoked it with their token); it has no credential there")]
    NoPerson(String),
    #[error("server '{0}' acts per principal (token_exchange) and SMS issues no workload identity; give SMS --workload-issuer (docs/identities.md)")]
    NoWorkloadIssuer(String),
}

/// A token bought for one principal at one server.
struct Cached {
    token: String,
    expires_at: Option<SystemTime>,
    due: SystemTime,
}

/// What a server's token request needs from the broker: its id, its URL
/// (the audience) and its client, as SMS's environment resolves them.
pub struct Server<'a> {
    pub id: &'a str,
    pub url: &'a str,
    pub client: &'a ClientConfig,
    pub subject_token_type: &'a str,
}

/// Seals delegations, mints workload JWTs, and caches what they buy.
pub struct PerPrincipal {
    /// `None` without `--workload-issuer`: no token exchange.
    issuer: Option<WorkloadIssuer>,
    key: Option<std::sync::Arc<SealingKey>>,
    cache: Mutex<HashMap<(String, String, String), Cached>>,
}

impl PerPrincipal {
    pub fn new(
        issuer: Option<WorkloadIssuer>,
        key: Option<std::sync::Arc<SealingKey>>,
    ) -> PerPrincipal {
        PerPrincipal {
            issuer,
            key,
            cache: Mutex::default(),
        }
    }

    pub fn issuer(&self) -> Option<&WorkloadIssuer> {
        self.issuer.as_ref()
    }

    /// The run's person, when `delegation` is one sealed for `node_id` and
    /// current; `None` for a run without one.
    pub fn open(
        &self,
        delegation: &[u8],
        node_id: &str,
    ) -> Result<Option<Delegation>, PerPrincipalError> {
        if delegation.is_empty() {
            return Ok(None);
        }
        let key = self.key.as_deref().ok_or(PerPrincipalError::NoKey)?;
        Ok(Some(Delegation::open(key, delegation, node_id)?))
    }

    /// `principal`'s `token`, sealed for `node_id` for `lasting` (the run).
    pub fn delegate(
        &self,
        node_id: &str,
        principal: &str,
        token: &str,
        lasting: Duration,
    ) -> Result<Vec<u8>, PerPrincipalError> {
        let key = self.key.as_deref().ok_or(PerPrincipalError::NoKey)?;
        Ok(Delegation::new(node_id, principal, token, lasting).seal(key)?)
    }

    /// A token of `server` for node `node_id`'s run: its person's, when
    /// `delegation` is the run's; the node's own without one. `refused`
    /// is the digest of one the server would not take.
    pub async fn token(
        &self,
        server: Server<'_>,
        node_id: &str,
        delegation: &[u8],
        refused: Option<&str>,
    ) -> Result<Issued, PerPrincipalError> {
        let issuer = self
            .issuer
            .as_ref()
            .ok_or_else(|| PerPrincipalError::NoWorkloadIssuer(server.id.to_string()))?;
        let person = self.open(delegation, node_id)?;
        // The actor is part of the token: one node's is never another's.
        let who = match &person {
            Some(person) => format!("{} via node/{node_id}", person.principal),
            None => format!("node/{node_id}"),
        };
        let slot = (who, server.id.to_string(), server.url.to_string());
        if let Some(issued) = self.cached(&slot, refused) {
            return Ok(issued);
        }
        let mint = |audience: &str| {
            issuer
                .node_jwt(node_id, audience)
                .map_err(|e| OAuthError::Flow(e.to_string()))
        };
        let bought = match &person {
            Some(person) => {
                let subject = Subject {
                    token: &person.subject_token,
                    token_type: server.subject_token_type,
                };
                let exchange =
                    spear_oauth::token_exchange(server.url, server.client, subject, &mint);
                within(exchange)
                    .await
                    .map_err(|e| refused_for(&server, person, e))?
            }
            None => within(spear_oauth::workload_token(
                server.url,
                server.client,
                &mint,
            ))
            .await
            .map_err(|e| PerPrincipalError::NoWorkload {
                node: node_id.to_string(),
                server: server.id.to_string(),
                why: e.to_string(),
            })?,
        };
        tracing::info!(server_id = %server.id, principal = %slot.0, "per-principal token obtained");
        Ok(self.keep(slot, bought))
    }

    /// The cached token of `slot`, unless it is due or was refused.
    fn cached(&self, slot: &(String, String, String), refused: Option<&str>) -> Option<Issued> {
        let cache = self.cache.lock();
        let held = cache.get(slot)?;
        let was_refused = refused.is_some_and(|r| r == token_digest(&held.token));
        (!was_refused && SystemTime::now() < held.due).then(|| Issued {
            access_token: held.token.clone(),
            expires_at: held.expires_at,
        })
    }

    fn keep(&self, slot: (String, String, String), bought: Granted) -> Issued {
        let now = SystemTime::now();
        let expires_at = bought.expires_in.map(|life| now + life);
        let due = expires_at.map_or(now + UNSAID_LIFETIME, |at| spear_oauth::renew_at(now, at));
        let mut cache = self.cache.lock();
        // Forget what nobody may be handed any more.
        cache.retain(|_, held| held.due > now);
        cache.insert(
            slot,
            Cached {
                token: bought.access_token.clone(),
                expires_at,
                due,
            },
        );
        Issued {
            access_token: bought.access_token,
            expires_at,
        }
    }
}

async fn within(
    request: impl std::future::Future<Output = Result<Granted, OAuthError>>,
) -> Result<Granted, OAuthError> {
    tokio::time::timeout(EXCHANGE_TIMEOUT, request)
        .await
        .unwrap_or_else(|_| {
            Err(OAuthError::Flow(format!(
                "the authorization server did not answer within {EXCHANGE_TIMEOUT:?}"
            )))
        })
}

/// An exchange that failed: the person's sentence when the authorization
/// server refused it, otherwise why it could not be asked.
fn refused_for(server: &Server<'_>, person: &Delegation, error: OAuthError) -> PerPrincipalError {
    match error {
        OAuthError::Refused(why) => PerPrincipalError::NotConnected {
            principal: person.principal.clone(),
            server: server.id.to_string(),
            why,
        },
        other => PerPrincipalError::Unreachable {
            server: server.id.to_string(),
            why: other.to_string(),
        },
    }
}
