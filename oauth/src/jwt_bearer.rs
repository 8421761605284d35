//! Workload identity federation (SEP-1933): a JWT the workload's platform
//! issued (a Kubernetes service-account token, a cloud's workload token, a
//! SPIFFE JWT-SVID) is traded at the server's authorization server for an
//! access token with the RFC 7523 JWT bearer grant. No person and no
//! client secret: the assertion is the credential.
//!
//! rmcp discovers the authorization server (RFC 9728, RFC 8414); the one
//! token request is ours, since neither rmcp nor `oauth2` offers this
//! grant for an arbitrary assertion. It is made once: a refusal
//! (`invalid_grant` for an expired or foreign JWT, `invalid_scope`,
//! `unauthorized_client`) is the answer, never retried with another grant.

use oauth2::basic::BasicTokenType;
use rmcp::transport::AuthorizationManager;

use crate::grant_request::{discover, post, Granted};
use crate::{ClientConfig, OAuthError};

/// The grant's registered name (RFC 7523 §2.1).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A manager holding an access token for `server_url`, bought with
/// `client`'s assertion; `challenge` is the server's 401, if there was one.
pub async fn jwt_bearer(
    server_url: &str,
    client: &ClientConfig,
    challenge: Option<&str>,
    scopes: &[String],
) -> Result<AuthorizationManager, OAuthError> {
    let assertion = client.assertion.as_ref().ok_or(OAuthError::Config {
        field: "assertion",
        why: "jwt_bearer needs the workload's JWT".into(),
    })?;
    let (manager, metadata, scopes) =
        discover(server_url, challenge, scopes, &client.network).await?;
    addressed_to(
        assertion.expose(),
        metadata.issuer.as_deref(),
        &metadata.token_endpoint,
    )?;
    let issued = trade(
        server_url,
        &metadata.token_endpoint,
        client,
        assertion.expose(),
        scopes,
    )
    .await?;
    tracing::info!(server = %server_url, "workload identity exchanged (JWT bearer)");
    let client_id = client.client_id.clone().unwrap_or_default();
    crate::tokens::hold(
        manager,
        &client_id,
        issued.access_token,
        BasicTokenType::Bearer,
        issued.expires_in,
        issued.scopes,
    )
    .await
}

/// An access token for `server_url` bought with a workload JWT that
/// `mint` makes for the authorization server it is given (its issuer):
/// SMS's own workload identity for a node, made for that server alone.
pub async fn workload_token(
    server_url: &str,
    client: &ClientConfig,
    mint: &(dyn Fn(&str) -> Result<String, OAuthError> + Sync),
) -> Result<Granted, OAuthError> {
    let (_, metadata, scopes) = discover(server_url, None, &client.scopes, &client.network).await?;
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    let assertion = mint(&audience)?;
    trade(
        server_url,
        &metadata.token_endpoint,
        client,
        &assertion,
        scopes,
    )
    .await
}

/// The one JWT bearer request.
async fn trade(
    server_url: &str,
    token_endpoint: &str,
    client: &ClientConfig,
    assertion: &str,
    scopes: Vec<String>,
) -> Result<Granted, OAuthError> {
    let form = vec![
        ("grant_type", GRANT_TYPE),
        ("assertion", assertion),
        ("resource", server_url),
    ];
    post(token_endpoint, form, client, scopes, "the workload's JWT").await
}

/// Refuses to send the workload's JWT to an authorization server it is not
/// for: the MCP server names its authorization server, so a hostile server
/// could otherwise collect a JWT good at another. Its `aud` must name the
/// issuer or the token endpoint (a trailing `/` aside).
fn addressed_to(
    assertion: &str,
    issuer: Option<&str>,
    token_endpoint: &str,
) -> Result<(), OAuthError> {
    let audience: Vec<String> = crate::grant_request::unverified_claims(assertion)
        .map(|claims| match &claims["aud"] {
            serde_json::Value::String(one) => vec![one.clone()],
            serde_json::Value::Array(many) => many
                .iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        })
        .unwrap_or_default();
    let trim = |s: &str| s.trim_end_matches('/').to_string();
    let wanted: Vec<String> = issuer
        .into_iter()
        .chain(std::iter::once(token_endpoint))
        .map(trim)
        .collect();
    if audience.iter().any(|aud| wanted.contains(&trim(aud))) {
        return Ok(());
    }
    Err(OAuthError::Flow(format!(
        "the workload's JWT is for {} and the server's authorization server is {}: it is not sent there",
        if audience.is_empty() { "no audience".to_string() } else { audience.join(", ") },
        wanted.first().map_or("unnamed", String::as_str)
    )))
}
