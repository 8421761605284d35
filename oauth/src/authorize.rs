//! The flows: answering a server's 401 with an authorization, and its 403
//! `insufficient_scope` with a step-up. rmcp does the protocol (metadata
//! discovery from the challenge, RFC 9728 and RFC 8414/OpenID, PKCE S256,
//! `resource` per RFC 8707, registration, `client_secret_basic`/`_post`/
//! `none` as the server advertises, token exchange and refresh).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::transport::auth::{ClientCredentialsConfig, JwtSigningAlgorithm};
use rmcp::transport::AuthorizationManager;

use crate::grant_request::parse_challenge;
use crate::{Browser, ClientConfig, Grant, OAuthError, Redirect};

/// Step-ups answered per login before giving up: a server that keeps
/// asking for more is misconfigured, and each one costs the operator a
/// trip through the browser.
pub const MAX_STEP_UPS: u32 = 3;

/// How long a login waits for the operator by default.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The logins of one client to one server.
pub struct Authorizer {
    server_url: String,
    client: ClientConfig,
    redirect: Redirect,
    browser: Browser,
    login_timeout: Duration,
    step_ups: AtomicU32,
}

impl Authorizer {
    pub fn new(
        server_url: impl Into<String>,
        client: ClientConfig,
        redirect: Redirect,
        browser: Browser,
    ) -> Authorizer {
        Authorizer {
            server_url: server_url.into(),
            client,
            redirect,
            browser,
            login_timeout: LOGIN_TIMEOUT,
            step_ups: AtomicU32::new(0),
        }
    }

    /// Answers a 401 (`challenge` is its `WWW-Authenticate`, if it had
    /// one): a manager holding fresh tokens.
    pub async fn authorize(
        &self,
        challenge: Option<&str>,
    ) -> Result<AuthorizationManager, OAuthError> {
        match self.client.grant {
            Grant::AuthorizationCode => {
                self.authorization_code(challenge, &self.client.scopes)
                    .await
            }
            Grant::ClientCredentials => {
                client_credentials(
                    &self.server_url,
                    &self.client,
                    challenge,
                    &self.client.scopes,
                )
                .await
            }
            Grant::EnterpriseManaged => {
                crate::enterprise_managed(&self.server_url, &self.client, challenge).await
            }
            Grant::JwtBearer => {
                crate::jwt_bearer(
                    &self.server_url,
                    &self.client,
                    challenge,
                    &self.client.scopes,
                )
                .await
            }
            Grant::TokenExchange => Err(per_principal_only()),
        }
    }

    async fn authorization_code(
        &self,
        challenge: Option<&str>,
        scopes: &[String],
    ) -> Result<AuthorizationManager, OAuthError> {
        let (pending, url) = crate::begin_login(
            &self.server_url,
            &self.client,
            self.redirect.uri(),
            challenge,
            scopes,
        )
        .await?;
        self.browser.open(&url);
        let callback = self.redirect.wait(self.login_timeout).await?;
        let manager = pending.finish(&callback).await?;
        tracing::info!(server = %self.server_url, "authorized");
        Ok(manager)
    }

    /// Answers a 403 `insufficient_scope`: the scopes held plus those the
    /// challenge names, through the browser again (or a new exchange for
    /// client credentials), at most [`MAX_STEP_UPS`] times.
    pub async fn step_up(
        &self,
        manager: &mut AuthorizationManager,
        challenge: &str,
    ) -> Result<(), OAuthError> {
        let done = self.step_ups.fetch_add(1, Ordering::SeqCst);
        if done >= MAX_STEP_UPS {
            return Err(OAuthError::StepUpLimit(MAX_STEP_UPS));
        }
        let required = parse_challenge(&self.server_url, challenge)
            .scope
            .unwrap_or_default();
        tracing::info!(server = %self.server_url, scope = %required, "the server asks for more scope");
        match self.client.grant {
            Grant::ClientCredentials => {
                let scopes = union(manager.get_current_scopes().await, &required);
                *manager =
                    client_credentials(&self.server_url, &self.client, Some(challenge), &scopes)
                        .await?;
                Ok(())
            }
            Grant::EnterpriseManaged => {
                let mut client = self.client.clone();
                client.scopes = union(manager.get_current_scopes().await, &required);
                *manager =
                    crate::enterprise_managed(&self.server_url, &client, Some(challenge)).await?;
                Ok(())
            }
            Grant::JwtBearer => {
                let scopes = union(manager.get_current_scopes().await, &required);
                *manager =
                    crate::jwt_bearer(&self.server_url, &self.client, Some(challenge), &scopes)
                        .await?;
                Ok(())
            }
            Grant::TokenExchange => Err(per_principal_only()),
            Grant::AuthorizationCode => {
                // A new authorization for the union (rmcp's own upgrade
                // helper holds a non-Send value across an await).
                let scopes = union(manager.get_current_scopes().await, &required);
                *manager = self.authorization_code(Some(challenge), &scopes).await?;
                Ok(())
            }
        }
    }
}

/// A new manager holding a token bought with `client`'s own credentials
/// for `scopes` (or, when empty, what the challenge or metadata name): the
/// client-credentials grant, for a login and for SMS renewing a token.
pub async fn client_credentials(
    server_url: &str,
    client: &ClientConfig,
    challenge: Option<&str>,
    scopes: &[String],
) -> Result<AuthorizationManager, OAuthError> {
    let mut manager = client.network.manager(server_url).await?;
    let resolution = manager.resolve_metadata_from_challenge(challenge).await?;
    manager.set_metadata(resolution.metadata);
    let scopes = if scopes.is_empty() {
        let asked = challenge.and_then(|c| parse_challenge(server_url, c).scope);
        manager.select_scopes(asked.as_deref(), &[])
    } else {
        scopes.to_vec()
    };
    let config = credentials_config(server_url, client, scopes)?;
    manager.validate_client_credentials_metadata(&config)?;
    manager.configure_client_credentials(&config)?;
    // rmcp's private_key_jwt exchange holds a non-Send value across an
    // await, so the exchange runs on a blocking thread of its own.
    let runtime = tokio::runtime::Handle::current();
    let (manager, exchanged) = tokio::task::spawn_blocking(move || {
        let exchanged = runtime.block_on(manager.exchange_client_credentials(&config));
        (manager, exchanged)
    })
    .await
    .map_err(|e| OAuthError::Flow(format!("the token exchange did not finish: {e}")))?;
    exchanged?;
    tracing::info!(server = %server_url, "client credentials exchanged");
    Ok(manager)
}

fn credentials_config(
    server_url: &str,
    client: &ClientConfig,
    scopes: Vec<String>,
) -> Result<ClientCredentialsConfig, OAuthError> {
    let client_id = client.client_id.clone().ok_or(OAuthError::Config {
        field: "client_id",
        why: "client_credentials needs a client_id".into(),
    })?;
    let resource = Some(server_url.to_string());
    if let Some((key, algorithm)) = &client.private_key {
        return Ok(ClientCredentialsConfig::PrivateKeyJwt {
            client_id,
            signing_key: key.expose().as_bytes().to_vec(),
            signing_algorithm: signing_algorithm(algorithm)?,
            token_endpoint_audience: None,
            scopes,
            resource,
        });
    }
    let secret = client.client_secret.as_ref().ok_or(OAuthError::Config {
        field: "client_secret",
        why: "client_credentials needs a client_secret or a private_key".into(),
    })?;
    Ok(ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret: secret.expose().to_string(),
        scopes,
        resource,
    })
}

/// `held` plus the space-separated `more`, each once, in order.
fn union(mut held: Vec<String>, more: &str) -> Vec<String> {
    for scope in more.split_whitespace() {
        if !held.iter().any(|s| s == scope) {
            held.push(scope.to_string());
        }
    }
    held
}

fn signing_algorithm(name: &str) -> Result<JwtSigningAlgorithm, OAuthError> {
    Ok(match name {
        "RS256" => JwtSigningAlgorithm::RS256,
        "RS384" => JwtSigningAlgorithm::RS384,
        "RS512" => JwtSigningAlgorithm::RS512,
        "ES256" => JwtSigningAlgorithm::ES256,
        "ES384" => JwtSigningAlgorithm::ES384,
        other => {
            return Err(OAuthError::Config {
                field: "signing_algorithm",
                why: format!("'{other}' is not one rmcp signs with"),
            })
        }
    })
}

/// A token_exchange server acts for whoever invoked the run: its tokens
/// come from SMS on a cluster node, for that person, never from a login
/// here.
fn per_principal_only() -> OAuthError {
    OAuthError::Config {
        field: "grant",
        why: "token_exchange acts for the person who invoked a run: SMS exchanges their token for a node's run, so call this server from a task on a cluster".into(),
    }
}
