//! `spearlet mcp` against a server behind OAuth: the operator logs in on
//! this terminal (a browser round trip to a loopback redirect, or a pasted
//! address), and the session's requests carry the tokens. Tokens live as
//! long as the command; a cluster's nodes get theirs from SMS instead.

use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use spear_oauth::dpop::DpopKey;
use spear_oauth::{AuthError, AuthorizationManager, Authorizer, ClientConfig, LoginFlags};
use spear_proto::v1::{EnterpriseIdp, OAuth, OauthGrant, ServerSpec};
use tokio::sync::Mutex;

use crate::env_refs::Resolver;
use crate::mcp::{Challenge, Credentials, TokenError, TokenSource};

/// How long a command waits for the server's first answer when a login
/// may come first: a person is in the loop.
const LOGIN_STARTUP_MS: u32 = 300_000;

/// The `auth` of an ad-hoc `--url` server, and how this terminal logs in.
#[derive(Debug, Args)]
pub struct OAuthFlags {
    /// The --url server is behind OAuth 2.1 (implied by the flags below).
    #[arg(long)]
    oauth: bool,
    /// A pre-registered client id [default: a metadata document or
    /// dynamic registration].
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// The client's secret, as a ${REFERENCE} to this shell's environment
    /// (a literal would show in the process list).
    #[arg(long, value_name = "${NAME}")]
    client_secret: Option<String>,
    /// A Client ID Metadata Document URL, used where the server supports it.
    #[arg(long, value_name = "URL")]
    client_metadata_url: Option<String>,
    /// A scope to ask for (repeatable) [default: what the server names].
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// Machine to machine: the client-credentials grant, no browser.
    #[arg(long)]
    client_credentials: bool,
    /// A PEM private key for private_key_jwt, as a ${REFERENCE}.
    #[arg(long, value_name = "${NAME}")]
    private_key: Option<String>,
    /// The private key's algorithm (RS256, RS384, RS512, ES256, ES384).
    #[arg(long, value_name = "ALG")]
    signing_algorithm: Option<String>,
    /// The workload's own JWT, as a ${REFERENCE}, traded for a token with
    /// the JWT bearer grant (workload identity federation; no browser).
    #[arg(long, value_name = "${NAME}", conflicts_with_all = ["client_credentials", "id_token"])]
    assertion: Option<String>,
    #[command(flatten)]
    enterprise: EnterpriseFlags,
    #[command(flatten)]
    login: LoginFlags,
}

/// Enterprise-managed authorization (SEP-990): the enterprise's identity
/// provider vouches for the user with an ID token; no browser.
#[derive(Debug, Args)]
pub struct EnterpriseFlags {
    /// The enterprise ID token to exchange, as a ${REFERENCE} (implies
    /// the enterprise_managed grant; --client-id is this client at the
    /// server's authorization server).
    #[arg(long, value_name = "${NAME}")]
    id_token: Option<String>,
    /// The identity provider's issuer.
    #[arg(long, value_name = "URL", requires = "id_token")]
    idp_issuer: Option<String>,
    /// The identity provider's token endpoint.
    #[arg(long, value_name = "URL", requires = "id_token")]
    idp_token_endpoint: Option<String>,
    /// This client at the identity provider.
    #[arg(long, value_name = "ID", requires = "id_token")]
    idp_client_id: Option<String>,
    /// Its secret at the identity provider, as a ${REFERENCE} [default: a public client].
    #[arg(long, value_name = "${NAME}", requires = "id_token")]
    idp_client_secret: Option<String>,
}

impl EnterpriseFlags {
    fn idp(&self) -> Option<EnterpriseIdp> {
        let id_token = self.id_token.clone()?;
        Some(EnterpriseIdp {
            issuer: self.idp_issuer.clone().unwrap_or_default(),
            token_endpoint: self.idp_token_endpoint.clone().unwrap_or_default(),
            client_id: self.idp_client_id.clone().unwrap_or_default(),
            client_secret: self.idp_client_secret.clone().unwrap_or_default(),
            id_token,
        })
    }
}

impl OAuthFlags {
    /// The `auth` these flags declare, if any.
    pub fn spec(&self) -> Option<OAuth> {
        let declared = self.oauth
            || self.client_id.is_some()
            || self.client_secret.is_some()
            || self.client_metadata_url.is_some()
            || self.client_credentials
            || self.private_key.is_some()
            || self.enterprise.id_token.is_some()
            || self.assertion.is_some();
        let idp = self.enterprise.idp();
        let grant = match (self.client_credentials, &idp, &self.assertion) {
            (true, _, _) => OauthGrant::ClientCredentials,
            (false, Some(_), _) => OauthGrant::EnterpriseManaged,
            (false, None, Some(_)) => OauthGrant::JwtBearer,
            (false, None, None) => OauthGrant::AuthorizationCode,
        };
        declared.then(|| OAuth {
            grant: grant as i32,
            idp,
            client_id: self.client_id.clone().unwrap_or_default(),
            client_secret: self.client_secret.clone().unwrap_or_default(),
            client_metadata_url: self.client_metadata_url.clone().unwrap_or_default(),
            scopes: self.scopes.clone(),
            private_key: self.private_key.clone().unwrap_or_default(),
            signing_algorithm: self.signing_algorithm.clone().unwrap_or_default(),
            assertion: self.assertion.clone().unwrap_or_default(),
            subject_token_type: String::new(),
            per_principal: false,
        })
    }

    /// The login for `spec`'s server, if its `auth` asks for one; secrets
    /// are resolved from this shell's environment.
    pub async fn login(&self, spec: &ServerSpec) -> Result<Option<Arc<LocalLogin>>> {
        let Some(auth) = &spec.auth else {
            return Ok(None);
        };
        let lookup = |name: &str| Ok(std::env::var(name).ok());
        let client = ClientConfig::from_spec(auth, &|field, text| {
            let mut resolver = Resolver::default();
            if !text.contains("${") {
                return Err(
                    "give it as a ${REFERENCE} to an environment variable, not a literal".into(),
                );
            }
            resolver
                .resolve(&format!("auth.{field}"), text, &lookup)
                .map_err(spear_oauth::Unresolved::from)
        })?;
        let mut client = client;
        // The operator's own terminal reaches what they point it at, as
        // the rest of `spearlet mcp` does; rmcp still checks the hosts
        // metadata names.
        client.network = spear_oauth::Network::unguarded();
        // A key of this command's own: an authorization server that takes
        // DPoP proofs binds its tokens to it (RFC 9449).
        let dpop = Arc::new(DpopKey::generate()?);
        client.dpop = Some(Arc::clone(&dpop));
        let redirect = self.login.redirect().await?;
        let browser = self.login.browser();
        let url = spec.url.clone();
        Ok(Some(Arc::new(LocalLogin {
            authorizer: Authorizer::new(url, client, redirect, browser),
            manager: Mutex::new(None),
            dpop,
        })))
    }
}

/// The tokens of one login on this terminal.
pub struct LocalLogin {
    authorizer: Authorizer,
    /// Held while a login or refresh runs, so concurrent refusals lead to
    /// one browser trip, not several.
    manager: Mutex<Option<AuthorizationManager>>,
    /// The key DPoP-bound tokens of this login are bound to.
    dpop: Arc<DpopKey>,
}

/// One login as the credentials of the command's one server.
pub struct Login(pub Arc<LocalLogin>);

impl Credentials for Login {
    fn tokens(&self, _server_id: &str) -> Arc<dyn TokenSource> {
        self.0.clone()
    }
}

fn sentence(error: impl std::fmt::Display) -> TokenError {
    TokenError(error.to_string())
}

/// The current access token, refreshed by rmcp if it expired; `None` when
/// there is none or it cannot be refreshed (the server's 401 then leads
/// to a login).
async fn current(manager: &AuthorizationManager) -> Result<Option<String>, TokenError> {
    match manager.get_access_token().await {
        Ok(token) => Ok(Some(token)),
        Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => Ok(None),
        Err(error) => Err(sentence(spear_oauth::describe(&error))),
    }
}

#[async_trait::async_trait]
impl TokenSource for LocalLogin {
    async fn dpop_key(&self) -> Option<Arc<DpopKey>> {
        let held = self.manager.lock().await;
        match held.as_ref() {
            Some(manager) if spear_oauth::dpop_bound(manager).await => Some(Arc::clone(&self.dpop)),
            _ => None,
        }
    }

    async fn token(&self) -> Result<Option<String>, TokenError> {
        match self.manager.lock().await.as_ref() {
            Some(manager) => current(manager).await,
            None => Ok(None),
        }
    }

    async fn challenged(
        &self,
        sent: Option<&str>,
        challenge: &Challenge,
    ) -> Result<Option<String>, TokenError> {
        let mut held = self.manager.lock().await;
        if let Some(manager) = held.as_ref() {
            // Another request already logged in or refreshed meanwhile.
            let now = current(manager).await?;
            if now.is_some() && now.as_deref() != sent {
                return Ok(now);
            }
        }
        match (challenge, held.as_mut()) {
            (Challenge::InsufficientScope(header), Some(manager)) => {
                self.authorizer
                    .step_up(manager, header)
                    .await
                    .map_err(sentence)?;
                return current(manager).await;
            }
            // The server refused a token we held: refresh it, and log in
            // again only if that fails.
            (Challenge::Unauthorized(_), Some(manager))
                if sent.is_some() && manager.refresh_token().await.is_ok() =>
            {
                return current(manager).await;
            }
            _ => {}
        }
        let (Challenge::Unauthorized(header) | Challenge::InsufficientScope(header)) = challenge;
        let fresh = self
            .authorizer
            .authorize(Some(header))
            .await
            .map_err(sentence)?;
        let token = current(&fresh).await;
        *held = Some(fresh);
        token
    }
}

/// Makes `spec` wait for a login at startup when one may be needed.
pub fn allow_for_login(spec: &mut ServerSpec) {
    let interactive = spec
        .auth
        .as_ref()
        .is_some_and(|a| a.grant == OauthGrant::AuthorizationCode as i32);
    if interactive {
        let timeouts = spec.timeouts.get_or_insert_with(Default::default);
        timeouts.startup_ms = timeouts.startup_ms.max(LOGIN_STARTUP_MS);
    }
}
