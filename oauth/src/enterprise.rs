//! Enterprise-managed authorization (SEP-990, "cross-app access"): the
//! enterprise's ID token is exchanged at its identity provider for an
//! identity assertion grant (ID-JAG, RFC 8693 token exchange), which the
//! MCP server's authorization server trades for an access token (RFC 7523
//! JWT bearer grant). rmcp does both exchanges and checks the ID-JAG's
//! claims; we discover the server's authorization server and keep the
//! token where a manager keeps tokens.

use oauth2::basic::BasicTokenType;
use oauth2::ClientSecret;
use rmcp::transport::auth::default_oauth_http_client;
use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
};
use rmcp::transport::AuthorizationManager;

use crate::{ClientConfig, OAuthError};

fn authentication(secret: Option<&crate::Secret>) -> EmaClientAuthentication {
    match secret {
        Some(secret) => EmaClientAuthentication::ClientSecretBasic(ClientSecret::new(
            secret.expose().to_string(),
        )),
        None => EmaClientAuthentication::None,
    }
}

/// A manager holding an access token for `server_url` obtained with
/// `client`'s identity provider and enterprise ID token.
pub async fn enterprise_managed(
    server_url: &str,
    client: &ClientConfig,
    challenge: Option<&str>,
) -> Result<AuthorizationManager, OAuthError> {
    let config = |field: &'static str, why: &str| OAuthError::Config {
        field,
        why: why.to_string(),
    };
    let idp = client
        .idp
        .as_ref()
        .ok_or_else(|| config("idp", "enterprise_managed needs the identity provider"))?;
    let client_id = client
        .client_id
        .clone()
        .ok_or_else(|| config("client_id", "enterprise_managed needs a client_id"))?;
    let mut manager = client.network.manager(server_url).await?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge)
        .await?
        .metadata;
    let issuer = metadata.issuer.clone().ok_or_else(|| {
        OAuthError::Flow("the server's authorization server names no issuer, which an identity assertion grant is addressed to".into())
    })?;
    let resource_as =
        EmaAuthorizationServer::new(issuer, metadata.token_endpoint.clone(), &client_id)
            .with_client_authentication(authentication(client.client_secret.as_ref()));
    manager.set_metadata(metadata);
    let identity_provider =
        EmaAuthorizationServer::new(&idp.issuer, &idp.token_endpoint, &idp.client_id)
            .with_client_authentication(authentication(idp.client_secret.as_ref()));
    let http = default_oauth_http_client()?;
    let token = EmaExchangeRequest::new_with_id_token(
        identity_provider,
        resource_as,
        server_url,
        idp.id_token.expose(),
    )
    .with_scopes(client.scopes.iter().cloned())
    .exchange(&http, &http)
    .await
    .map_err(|e| OAuthError::Flow(format!("enterprise-managed authorization failed: {e}")))?;
    tracing::info!(server = %server_url, "enterprise-managed authorization exchanged");

    crate::tokens::hold(
        manager,
        &client_id,
        token.access_token.secret().to_string(),
        BasicTokenType::Bearer,
        token.expires_in,
        token.scopes.into_iter().collect(),
    )
    .await
}
