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

use std::time::Duration;

use oauth2::basic::BasicTokenType;
use rmcp::transport::AuthorizationManager;
use serde::Deserialize;

use crate::{ClientConfig, OAuthError};

/// The grant's registered name (RFC 7523 §2.1).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// How long the authorization server has to answer.
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Deserialize)]
struct Issued {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct Refused {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

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
    let mut manager = AuthorizationManager::new(server_url).await?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge)
        .await?
        .metadata;
    let token_endpoint = metadata.token_endpoint.clone();
    addressed_to(
        assertion.expose(),
        metadata.issuer.as_deref(),
        &token_endpoint,
    )?;
    manager.set_metadata(metadata);
    let scopes = if scopes.is_empty() {
        let asked = challenge.and_then(|c| crate::authorize::parse_challenge(server_url, c).scope);
        manager.select_scopes(asked.as_deref(), &[])
    } else {
        scopes.to_vec()
    };
    let scope = scopes.join(" ");
    let mut form = vec![
        ("grant_type", GRANT_TYPE),
        ("assertion", assertion.expose()),
        ("resource", server_url),
    ];
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    let mut request = http()?.post(&token_endpoint);
    match (&client.client_id, &client.client_secret) {
        (Some(id), Some(secret)) => request = request.basic_auth(id, Some(secret.expose())),
        (Some(id), None) => form.push(("client_id", id)),
        (None, _) => {}
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&form)
        .finish();
    let response = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|e| OAuthError::Flow(format!("the token request failed: {e}")))?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| OAuthError::Flow(format!("reading the token response failed: {e}")))?;
    if !status.is_success() {
        return Err(OAuthError::Flow(refusal(status, &body)));
    }
    let issued: Issued = serde_json::from_slice(&body).map_err(|_| {
        OAuthError::Flow("the authorization server's token response is not a token".into())
    })?;
    let granted: Vec<String> = match &issued.scope {
        Some(scope) => scope.split_whitespace().map(str::to_string).collect(),
        None => scopes,
    };
    tracing::info!(server = %server_url, "workload identity exchanged (JWT bearer)");
    let client_id = client.client_id.clone().unwrap_or_default();
    crate::tokens::hold(
        manager,
        &client_id,
        issued.access_token,
        BasicTokenType::Bearer,
        issued.expires_in.map(Duration::from_secs),
        granted,
    )
    .await
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
    use base64::Engine;
    let audience: Vec<String> = assertion
        .split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .ok()
        })
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
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

/// A client for the one request: redirects are not followed, since the
/// request carries the assertion.
fn http() -> Result<reqwest::Client, OAuthError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| OAuthError::Flow(format!("no HTTP client: {e}")))
}

/// The sentence for a refused token request: the OAuth error code and
/// description, which never hold the assertion.
fn refusal(status: reqwest::StatusCode, body: &[u8]) -> String {
    match serde_json::from_slice::<Refused>(body) {
        Ok(Refused {
            error,
            error_description,
        }) => format!(
            "the authorization server refused the workload's JWT ({status}): {}{}",
            error.escape_default(),
            error_description
                .map(|d| format!(": {}", d.escape_default()))
                .unwrap_or_default()
        ),
        Err(_) => format!("the authorization server refused the workload's JWT ({status})"),
    }
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn a_refusal_names_the_oauth_error() {
        let body = br#"{"error":"invalid_grant","error_description":"JWT assertion is expired"}"#;
        assert_eq!(
            refusal(reqwest::StatusCode::BAD_REQUEST, body),
            "the authorization server refused the workload's JWT (400 Bad Request): invalid_grant: JWT assertion is expired"
        );
        assert_eq!(
            refusal(reqwest::StatusCode::BAD_GATEWAY, b"<html>"),
            "the authorization server refused the workload's JWT (502 Bad Gateway)"
        );
    }
}
