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
use std::time::{Duration, SystemTime};

use spear_oauth::{token_digest, ClientConfig, OAuthError, StoredCredentials};
use spear_proto::refs::substitute;
use spear_proto::v1::{CredentialRecord, CredentialStatus, OAuth, OauthGrant};
use tracing::{info, warn};

use super::state::{millis, status_of, status_without_record};
use super::{BrokerError, PerPrincipal, SealingKey, Vault, VaultError};
use crate::watch::Hub;

/// A renewal is one token request; it must end well inside the vault's
/// lock lease.
const RENEW_TIMEOUT: Duration = Duration::from_secs(20);

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
        }
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
        let client = ClientConfig::from_environment(
            &server.auth,
            &lookup,
            "SMS's environment; set it where SMS runs (SMS renews this server's tokens)",
        )
        .map_err(|e| config(e.to_string()))?;
        Ok((url, client))
    }

    fn open(
        &self,
        key: &SealingKey,
        record: &CredentialRecord,
    ) -> Result<StoredCredentials, BrokerError> {
        if record.key_id != key.id() {
            return Err(BrokerError::WrongKey {
                id: record.server_id.clone(),
                sealed_with: record.key_id.clone(),
                have: key.id().to_string(),
            });
        }
        let corrupt = |reason: &str| VaultError::Corrupt {
            key: record.server_id.clone(),
            reason: reason.to_string(),
        };
        let plain = key
            .open(&record.server_id, &record.sealed)
            .map_err(|_| corrupt("its sealed part does not open with SMS's key: it was altered"))?;
        Ok(serde_json::from_slice(&plain)
            .map_err(|_| corrupt("its sealed part is not a credential"))?)
    }

    /// `base` with `held` sealed into it and its clear fields set from it.
    fn seal(
        &self,
        key: &SealingKey,
        held: &StoredCredentials,
        mut base: CredentialRecord,
    ) -> Result<CredentialRecord, BrokerError> {
        let plain = serde_json::to_vec(held).map_err(|e| BrokerError::BadLogin {
            id: base.server_id.clone(),
            why: e.to_string(),
        })?;
        base.sealed = key
            .seal(&base.server_id, &plain)
            .map_err(|_| {
                VaultError::Unavailable("the system has no randomness to seal with".into())
            })?
            .into();
        base.key_id = key.id().to_string();
        base.scopes = held.granted_scopes.clone();
        base.expires_at_ms = spear_oauth::expires_at(held).map_or(0, millis);
        base.has_refresh_token = spear_oauth::has_refresh_token(held);
        base.problem.clear();
        Ok(base)
    }

    /// A current access token for server `id`; `refused` is the digest
    /// ([`token_digest`]) of one its server refused, which is never handed
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

    /// The current token of `holder`'s credential, renewed if it is due or
    /// was refused.
    pub(super) async fn token_at(
        &self,
        holder: &Holder,
        server: &Protected,
        refused: Option<&str>,
    ) -> Result<Issued, BrokerError> {
        let key = self.key()?;
        let grant = server.grant();
        if let Some(issued) = self.current(key, holder, grant, refused).await? {
            return Ok(issued);
        }
        let _lock = self.vault.lock(&holder.record).await?;
        // Another request or replica may have renewed it while we waited.
        if let Some(issued) = self.current(key, holder, grant, refused).await? {
            return Ok(issued);
        }
        self.renew(key, holder, server).await
    }

    /// The record's token, if it may be handed out as it is: obtained
    /// with the server's current grant, not refused, not due.
    async fn current(
        &self,
        key: &SealingKey,
        holder: &Holder,
        grant: OauthGrant,
        refused: Option<&str>,
    ) -> Result<Option<Issued>, BrokerError> {
        let Some(record) = self.vault.get(&holder.record).await? else {
            return Ok(None);
        };
        if record.grant != grant as i32 {
            // The server file changed its grant since.
            return Ok(None);
        }
        if !record.problem.is_empty() {
            return Err(BrokerError::NeedsLogin {
                id: holder.server.clone(),
                why: record.problem,
            });
        }
        let held = self.open(key, &record)?;
        let Some(token) = spear_oauth::access_token(&held) else {
            return Ok(None);
        };
        let was_refused = refused.is_some_and(|r| r == token_digest(token));
        let due = spear_oauth::due_at(&held).is_some_and(|at| at <= SystemTime::now());
        if was_refused || due {
            return Ok(None);
        }
        Ok(Some(Issued {
            access_token: token.to_string(),
            expires_at: spear_oauth::expires_at(&held),
        }))
    }

    /// Renews `holder`'s credential; the caller holds its lock.
    async fn renew(
        &self,
        key: &SealingKey,
        holder: &Holder,
        server: &Protected,
    ) -> Result<Issued, BrokerError> {
        let id = holder.server.as_str();
        let (url, client) = self.client(id, server)?;
        let grant = server.grant();
        // A record of another grant (the server file changed) is of no use.
        let record = self
            .vault
            .get(&holder.record)
            .await?
            .filter(|r| r.grant == grant as i32);
        if grant == OauthGrant::AuthorizationCode && record.is_none() {
            return Err(BrokerError::NotLoggedIn(id.to_string()));
        }
        let renewal = async {
            match grant {
                OauthGrant::ClientCredentials => {
                    let manager =
                        spear_oauth::client_credentials(&url, &client, None, &client.scopes)
                            .await?;
                    spear_oauth::held(&manager).await
                }
                OauthGrant::EnterpriseManaged => {
                    let manager = spear_oauth::enterprise_managed(&url, &client, None).await?;
                    spear_oauth::held(&manager).await
                }
                OauthGrant::JwtBearer => {
                    let manager =
                        spear_oauth::jwt_bearer(&url, &client, None, &client.scopes).await?;
                    spear_oauth::held(&manager).await
                }
                OauthGrant::TokenExchange => Err(OAuthError::Config {
                    field: "grant",
                    why:
                        "token_exchange tokens are per run (each its person's), never the cluster's"
                            .into(),
                }),
                OauthGrant::AuthorizationCode => {
                    let held = match &record {
                        Some(record) => self.open(key, record),
                        None => Err(BrokerError::NotLoggedIn(id.to_string())),
                    }
                    .map_err(|e| OAuthError::Flow(e.to_string()))?;
                    if !spear_oauth::has_refresh_token(&held) {
                        return Err(OAuthError::RefreshRefused(
                            "the access token is due and the authorization server gave no refresh token with it (if it issues them only for offline_access, add that to auth.scopes)".into(),
                        ));
                    }
                    spear_oauth::refresh(&url, &client, held).await
                }
            }
        };
        let renewed = match tokio::time::timeout(RENEW_TIMEOUT, renewal).await {
            Ok(renewed) => renewed,
            Err(_) => Err(OAuthError::Flow(format!(
                "the authorization server did not answer within {RENEW_TIMEOUT:?}"
            ))),
        };
        match renewed {
            Ok(held) => {
                let base = CredentialRecord {
                    server_id: holder.record.clone(),
                    grant: grant as i32,
                    refreshed_at_ms: millis(SystemTime::now()),
                    ..record.unwrap_or_default()
                };
                let sealed = self.seal(key, &held, base)?;
                let expires_at_ms = sealed.expires_at_ms;
                self.vault.put(sealed).await?;
                info!(server_id = %id, expires_at_ms, grant = grant.label(), "OAuth token renewed");
                Ok(Issued {
                    access_token: spear_oauth::access_token(&held)
                        .unwrap_or_default()
                        .to_string(),
                    expires_at: spear_oauth::expires_at(&held),
                })
            }
            Err(OAuthError::RefreshRefused(why)) => {
                if let Some(mut record) = record {
                    record.problem = why.clone();
                    self.vault.put(record).await?;
                }
                warn!(server_id = %id, problem = %why, "OAuth credential cannot be renewed; an operator must log in again");
                Err(BrokerError::NeedsLogin {
                    id: id.to_string(),
                    why,
                })
            }
            Err(error) => Err(BrokerError::Renew {
                id: id.to_string(),
                why: error.to_string(),
            }),
        }
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
