//! The broker: a current access token per protected server, renewed once
//! across replicas. For a node's request it
//! 1. reads the server's record and hands out its access token when it is
//!    neither due for renewal nor the one the node says its server refused;
//! 2. otherwise takes the server's renewal lock, reads again (another
//!    replica may have renewed it while this one waited), and only then
//! 3. renews: the refresh token for `authorization_code`, a new exchange
//!    for `client_credentials`; a refresh token the authorization server
//!    refuses for good is recorded as the credential's problem, so every
//!    later request, and `sms oauth status`, says to log in again instead
//!    of trying it again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use spear_oauth::{ClientConfig, StoredCredentials};
use spear_proto::refs::substitute;
use spear_proto::v1::{CredentialRecord, CredentialStatus, OAuth, OauthGrant};
use tracing::info;

use super::state::{millis, status_of, status_without_record};
use super::{BrokerError, PerPrincipal, SealingKey, Vault};
use crate::watch::Hub;

mod renew;
mod sealed;

/// An access token handed to a node. `Debug` does not show it.
pub struct Issued {
    pub access_token: String,
    pub expires_at: Option<SystemTime>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

pub struct Broker {
    pub(super) vault: Arc<dyn Vault>,
    key: Option<Arc<SealingKey>>,
    pub(super) hub: Arc<Hub>,
    per_principal: Option<Arc<PerPrincipal>>,
    /// Where its OAuth flows may connect (`--egress`).
    network: spear_oauth::Network,
}

/// A protected server as the registry has it.
pub(super) struct Protected {
    url: String,
    pub(super) auth: OAuth,
}

/// Where one credential is kept: the server it is for, and its record in
/// the vault (the server's id for the cluster's own; the server's id and a
/// digest of the person for a person's own login).
pub(super) struct Holder {
    pub(super) server: String,
    pub(super) record: String,
}

impl Holder {
    pub(super) fn shared(server: &str) -> Holder {
        Holder {
            server: server.to_string(),
            record: server.to_string(),
        }
    }

    /// `principal`'s own credential for `server`. Server ids never hold
    /// `@`, so a person's record is never a server's.
    pub(super) fn person(server: &str, principal: &str) -> Holder {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(principal.as_bytes()));
        Holder {
            server: server.to_string(),
            record: format!("{server}@{}", &digest[..32]),
        }
    }
}

impl Protected {
    fn grant(&self) -> OauthGrant {
        grant_of(&self.auth)
    }
}

/// Whether a server's calls carry each run's person's credential: token
/// exchange, or people's own logins (`per_principal`).
pub(super) fn acts_per_principal(auth: &OAuth) -> bool {
    let grant = grant_of(auth);
    grant == OauthGrant::TokenExchange
        || (grant == OauthGrant::AuthorizationCode && auth.per_principal)
}

/// How `sms oauth status` lists a server: one whose people log in
/// themselves needs no login of the cluster's (its tokens come on demand).
fn listed_grant(auth: &OAuth) -> OauthGrant {
    if acts_per_principal(auth) {
        OauthGrant::TokenExchange
    } else {
        grant_of(auth)
    }
}

pub(super) fn grant_of(auth: &OAuth) -> OauthGrant {
    OauthGrant::try_from(auth.grant).unwrap_or(OauthGrant::AuthorizationCode)
}

impl Broker {
    /// Without a key the broker holds nothing and says how to give it one.
    pub fn new(vault: Arc<dyn Vault>, key: Option<Arc<SealingKey>>, hub: Arc<Hub>) -> Broker {
        Broker {
            vault,
            key,
            hub,
            per_principal: None,
            network: spear_oauth::Network::default(),
        }
    }

    /// Sends every OAuth request through `network` (SMS's `--egress`).
    pub fn with_network(mut self, network: spear_oauth::Network) -> Broker {
        self.network = network;
        self
    }

    /// Serves the servers that act per principal with `per_principal`.
    pub fn with_per_principal(mut self, per_principal: Option<Arc<PerPrincipal>>) -> Broker {
        self.per_principal = per_principal;
        self
    }

    /// What seals runs' delegations and issues nodes' workload identity.
    pub fn per_principal(&self) -> Option<&Arc<PerPrincipal>> {
        self.per_principal.as_ref()
    }

    /// Whether server `id` acts per principal (its tokens are per run).
    pub fn is_per_principal(&self, id: &str) -> bool {
        self.spec(id)
            .and_then(|spec| spec.auth)
            .is_some_and(|auth| acts_per_principal(&auth))
    }

    /// The id of SMS's key, if it has one.
    pub fn key_id(&self) -> Option<&str> {
        self.key.as_deref().map(SealingKey::id)
    }

    fn key(&self) -> Result<&SealingKey, BrokerError> {
        self.key.as_deref().ok_or(BrokerError::NoKey)
    }

    /// The registered server `id`, if there is one.
    pub fn spec(&self, id: &str) -> Option<spear_proto::v1::ServerSpec> {
        self.hub
            .with_servers(|_, _, servers| servers.get(id).and_then(|r| r.spec.clone()))
    }

    pub(super) fn protected(&self, id: &str) -> Result<Protected, BrokerError> {
        let spec = self
            .spec(id)
            .ok_or_else(|| BrokerError::UnknownServer(id.to_string()))?;
        let auth = spec
            .auth
            .ok_or_else(|| BrokerError::NotProtected(id.to_string()))?;
        Ok(Protected {
            url: spec.url,
            auth,
        })
    }

    /// The server's URL and client, their references resolved from SMS's
    /// environment (SMS is where the cluster's tokens are renewed).
    pub(super) fn client(
        &self,
        id: &str,
        server: &Protected,
    ) -> Result<(String, ClientConfig), BrokerError> {
        let lookup = |name: &str| std::env::var(name).ok();
        let config = |why: String| BrokerError::Config {
            id: id.to_string(),
            why,
        };
        let url = substitute(&server.url, &lookup).map_err(|e| {
            config(format!(
                "url: {e} in SMS's environment; set it where SMS runs"
            ))
        })?;
        let mut client = ClientConfig::from_environment(
            &server.auth,
            &lookup,
            "SMS's environment; set it where SMS runs (SMS renews this server's tokens)",
        )
        .map_err(|e| config(e.to_string()))?;
        // A hostile server's metadata names where its flow goes next.
        client.network = self.network.for_flow();
        Ok((url, client))
    }

    /// A current access token for server `id`; `refused` is the digest
    /// ([`token_digest`](spear_oauth::token_digest)) of one its server refused, which is never handed
    /// out again.
    pub async fn access_token(
        &self,
        id: &str,
        refused: Option<&str>,
    ) -> Result<Issued, BrokerError> {
        let server = self.protected(id)?;
        if acts_per_principal(&server.auth) {
            return Err(BrokerError::PerRun(id.to_string()));
        }
        self.token_at(&Holder::shared(id), &server, refused).await
    }

    /// What a login to server `id` starts from (the console's): its URL
    /// and client, resolved as SMS resolves them to renew its tokens.
    /// Refused for a server whose grant needs nobody to log in.
    pub fn login_client(&self, id: &str) -> Result<(String, ClientConfig), BrokerError> {
        let server = self.protected(id)?;
        logged_in_to(id, &server)?;
        self.client(id, &server)
    }

    /// Stores what `sms oauth login` obtained for server `id`
    /// (`credentials_json`, rmcp's stored credentials), sealed, replacing
    /// any credential before it. `by` is who logged in.
    pub async fn put(
        &self,
        id: &str,
        credentials_json: &str,
        by: &str,
    ) -> Result<CredentialStatus, BrokerError> {
        let server = self.protected(id)?;
        if acts_per_principal(&server.auth) {
            return Err(BrokerError::PerPerson(id.to_string()));
        }
        self.put_at(&Holder::shared(id), &server, credentials_json, by)
            .await
    }

    /// Stores a login's credentials as `holder`'s.
    pub(super) async fn put_at(
        &self,
        holder: &Holder,
        server: &Protected,
        credentials_json: &str,
        by: &str,
    ) -> Result<CredentialStatus, BrokerError> {
        let key = self.key()?;
        let id = holder.server.as_str();
        let grant = logged_in_to(id, server)?;
        let bad = |why: String| BrokerError::BadLogin {
            id: id.to_string(),
            why,
        };
        // serde's messages may quote the input; only the position is shown.
        let held: StoredCredentials = serde_json::from_str(credentials_json).map_err(|e| {
            bad(format!(
                "it is not a credential as `sms oauth login` sends one (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if spear_oauth::access_token(&held).is_none_or(str::is_empty) {
            return Err(bad("it holds no access token".into()));
        }
        let _lock = self.vault.lock(&holder.record).await?;
        let now = SystemTime::now();
        let base = CredentialRecord {
            server_id: holder.record.clone(),
            grant: grant as i32,
            logged_in_at_ms: millis(now),
            logged_in_by: by.to_string(),
            ..CredentialRecord::default()
        };
        let record = self.seal(key, &held, base)?;
        self.vault.put(record.clone()).await?;
        info!(server_id = %id, by, "OAuth credential stored");
        Ok(status_of(&record, true, key.id(), now))
    }

    /// Forgets server `id`'s credential; whether there was one.
    pub async fn forget(&self, id: &str) -> Result<bool, BrokerError> {
        let _lock = self.vault.lock(id).await?;
        Ok(self.vault.delete(id).await?)
    }

    /// Every credential SMS keeps and every protected server without one,
    /// by server id.
    pub async fn statuses(&self) -> Result<Vec<CredentialStatus>, BrokerError> {
        let records = self.vault.list().await?;
        let protected: BTreeMap<String, OauthGrant> = self.hub.with_servers(|_, _, servers| {
            servers
                .iter()
                .filter_map(|r| r.spec.as_ref())
                .filter_map(|s| s.auth.as_ref().map(|a| (s.id.clone(), listed_grant(a))))
                .collect()
        });
        let key_id = self.key_id().unwrap_or_default();
        let now = SystemTime::now();
        let mut out = BTreeMap::new();
        // People's own logins are theirs; the list is the cluster's.
        for record in records.iter().filter(|r| !r.server_id.contains('@')) {
            let in_registry = protected.contains_key(&record.server_id);
            out.insert(
                record.server_id.clone(),
                status_of(record, in_registry, key_id, now),
            );
        }
        for (id, grant) in protected {
            if !out.contains_key(&id) {
                out.insert(id.clone(), status_without_record(&id, grant));
            }
        }
        Ok(out.into_values().collect())
    }
}

/// The grant of a server a person logs in to (authorization code); any
/// other grant gets its tokens without one.
fn logged_in_to(id: &str, server: &Protected) -> Result<OauthGrant, BrokerError> {
    let grant = server.grant();
    if grant != OauthGrant::AuthorizationCode {
        return Err(BrokerError::NoLoginNeeded {
            id: id.to_string(),
            grant: grant.label(),
        });
    }
    Ok(grant)
}
