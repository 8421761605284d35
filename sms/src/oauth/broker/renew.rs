//! A node's token from the broker: the record's current one when it may be handed out, else a
//! renewal under the server's lock (the refresh token, or a new exchange for the grants that
//! need no login), with a refresh token refused for good recorded as the credential's problem.

use std::time::{Duration, SystemTime};

use spear_oauth::{token_digest, OAuthError};
use spear_proto::v1::{CredentialRecord, OauthGrant};
use tracing::{info, warn};

use super::{Broker, Holder, Issued, Protected};
use crate::oauth::state::millis;
use crate::oauth::{BrokerError, SealingKey};

/// A renewal is one token request; it must end well inside the vault's
/// lock lease.
const RENEW_TIMEOUT: Duration = Duration::from_secs(20);

impl Broker {
    /// The current token of `holder`'s credential, renewed if it is due or
    /// was refused.
    pub(in crate::oauth) async fn token_at(
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
            Ok(renewed) => renewed.map_err(|e| client.network.explain(e)),
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
}
