//! OAuth credentials SMS holds for the cluster: one per server whose file
//! declares `auth`, shared by every node and every replica. Entry point:
//! [`Broker`], which
//! - takes what an operator's `sms oauth login` obtained ([`Broker::put`]),
//! - hands nodes a current access token ([`Broker::access_token`]),
//!   renewing it (refresh token, or client credentials) when it is due,
//!   under a renewal lock so replicas renew it once,
//! - reports each credential's state without its values ([`Broker::statuses`]),
//! - and, for servers that act per principal, hands a node the token of its
//!   run's person, or its own ([`per_principal`]).
//!
//! Records are sealed with SMS's key ([`SealingKey`]) before they reach the
//! [`vault`]; refresh tokens never leave SMS, access tokens only to nodes.

mod broker;
mod people;
pub mod per_principal;
mod state;
pub mod vault;

pub use crate::seal::{KeyError, SealingKey};
pub use broker::{Broker, Issued};
pub use per_principal::{PerPrincipal, PerPrincipalError, WorkloadIssuer};
pub use state::millis;
pub use vault::{EtcdVault, MemoryVault, Vault, VaultError};

/// Why the broker cannot do what was asked: one sentence for the operator
/// (through `sms oauth`) or for the node's status.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("SMS holds no OAuth credentials: it was started without a key; give it --oauth-key-file FILE (make one with `sms oauth keygen FILE`)")]
    NoKey,
    #[error("there is no server '{0}' in the registry")]
    UnknownServer(String),
    #[error("server '{0}' has no \"auth\" in its server file, so it needs no credential")]
    NotProtected(String),
    #[error("server '{id}' uses {grant}: SMS gets its tokens itself, nobody logs in")]
    NoLoginNeeded { id: String, grant: &'static str },
    #[error("nobody has logged in to server '{0}' yet; run `sms oauth login {0}`")]
    NotLoggedIn(String),
    #[error("the OAuth credential for server '{id}' can no longer be renewed: {why}; run `sms oauth login {id}`")]
    NeedsLogin { id: String, why: String },
    #[error("the OAuth credential for server '{id}' was sealed with key {sealed_with} and SMS has key {have}; give SMS that key, or run `sms oauth login {id}` again")]
    WrongKey {
        id: String,
        sealed_with: String,
        have: String,
    },
    #[error("server '{id}': {why}")]
    Config { id: String, why: String },
    #[error("could not get a token for server '{id}': {why}")]
    Renew { id: String, why: String },
    #[error("the login for server '{id}' is not usable: {why}")]
    BadLogin { id: String, why: String },
    #[error(transparent)]
    Vault(#[from] VaultError),
    #[error(transparent)]
    PerPrincipal(#[from] PerPrincipalError),
    #[error("server '{0}' acts per principal: its tokens are for runs, each its person's")]
    PerRun(String),
    #[error("server '{0}' acts for each person with their own login: each person connects their own account (`sms oauth login {0} --principal-token '${{ID_TOKEN}}'`), not the cluster")]
    PerPerson(String),
    #[error("server '{0}' takes one login for the cluster (its file does not say \"per_principal\": true); an admin logs in to it")]
    NotPerPerson(String),
}
