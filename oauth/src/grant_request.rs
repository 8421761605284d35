//! One token request of a grant rmcp does not make itself (RFC 7523 JWT
//! bearer, RFC 8693 token exchange): the form posted to the authorization
//! server's token endpoint, the client authenticated as its file says, and
//! the answer read as a token or as the server's refusal. Entry point:
//! [`post`]. The request is made once: a refusal is the answer.

use std::time::Duration;

use rmcp::transport::auth::{AuthorizationMetadata, WWWAuthenticateParams};
use rmcp::transport::AuthorizationManager;
use serde::Deserialize;

use crate::network::{read_bounded, Network};
use crate::{ClientConfig, OAuthError};

/// What a `WWW-Authenticate` challenge of the server at `server_url` asks
/// (nothing when the URL does not parse).
pub(crate) fn parse_challenge(server_url: &str, header: &str) -> WWWAuthenticateParams {
    match url::Url::parse(server_url) {
        Ok(base) => WWWAuthenticateParams::parse(header, &base),
        Err(_) => WWWAuthenticateParams::default(),
    }
}

/// What the authorization server issued.
pub struct Granted {
    pub access_token: String,
    pub expires_in: Option<Duration>,
    /// The scopes granted, when the server said (otherwise those asked).
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

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

/// The authorization server of `server_url` (RFC 9728, then RFC 8414),
/// found from `challenge` when there was one, and the scopes to ask for:
/// `scopes`, or what the challenge or metadata name.
pub(crate) async fn discover(
    server_url: &str,
    challenge: Option<&str>,
    scopes: &[String],
    network: &Network,
) -> Result<(AuthorizationManager, AuthorizationMetadata, Vec<String>), OAuthError> {
    let mut manager = network.manager(server_url).await?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge)
        .await?
        .metadata;
    manager.set_metadata(metadata.clone());
    let scopes = if scopes.is_empty() {
        let asked = challenge.and_then(|c| parse_challenge(server_url, c).scope);
        manager.select_scopes(asked.as_deref(), &[])
    } else {
        scopes.to_vec()
    };
    Ok((manager, metadata, scopes))
}

/// Posts `form` (plus `scope` and the client's id) to `token_endpoint`;
/// `what` names the credential presented, for the refusal's sentence ("the
/// workload's JWT").
pub(crate) async fn post(
    token_endpoint: &str,
    mut form: Vec<(&str, &str)>,
    client: &ClientConfig,
    scopes: Vec<String>,
    what: &str,
) -> Result<Granted, OAuthError> {
    let scope = scopes.join(" ");
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    let basic = match (&client.client_id, &client.client_secret) {
        (Some(id), Some(secret)) => Some((id.as_str(), secret.expose())),
        (Some(id), None) => {
            form.push(("client_id", id));
            None
        }
        (None, _) => None,
    };
    let body = send(token_endpoint, &form, basic, what, &client.network).await?;
    let issued: Issued = serde_json::from_slice(&body).map_err(|_| {
        OAuthError::Flow("the authorization server's token response is not a token".into())
    })?;
    Ok(Granted {
        access_token: issued.access_token,
        expires_in: issued.expires_in.map(Duration::from_secs),
        scopes: match &issued.scope {
            Some(scope) => scope.split_whitespace().map(str::to_string).collect(),
            None => scopes,
        },
    })
}

/// The claims of `jwt`, unverified: for deciding where a credential may
/// be sent, never for trusting what it says.
pub(crate) fn unverified_claims(jwt: &str) -> Option<serde_json::Value> {
    use base64::Engine;
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Posts `form` to `token_endpoint`, the client authenticated with
/// `basic` (id and secret) when given: the answer's body, or the
/// authorization server's refusal as [`OAuthError::Refused`].
pub(crate) async fn send(
    token_endpoint: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
    what: &str,
    network: &Network,
) -> Result<Vec<u8>, OAuthError> {
    let mut request = network.token_request(token_endpoint);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let request = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .build()
        .map_err(|e| OAuthError::Flow(format!("the token request cannot be made: {e}")))?;
    let response = network
        .send(request, false)
        .await
        .map_err(|e| OAuthError::Flow(format!("the token request failed: {}", sentence(e))))?;
    let status = response.status();
    let body = read_bounded(response).await.map_err(|e| {
        OAuthError::Flow(format!(
            "reading the token response failed: {}",
            sentence(e)
        ))
    })?;
    if !status.is_success() {
        return Err(OAuthError::Refused(refusal(status, &body, what)));
    }
    Ok(body)
}

/// `error` and its causes, without any URL (a token endpoint's query may
/// carry secrets).
pub(crate) fn sentence(error: Box<dyn std::error::Error + Send + Sync>) -> String {
    let error: Box<dyn std::error::Error + Send + Sync> = match error.downcast::<reqwest::Error>() {
        Ok(e) => Box::new(e.without_url()),
        Err(other) => other,
    };
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The sentence for a refused token request: the OAuth error code and
/// description, which never hold what was presented.
fn refusal(status: reqwest::StatusCode, body: &[u8], what: &str) -> String {
    match serde_json::from_slice::<Refused>(body) {
        Ok(Refused {
            error,
            error_description,
        }) => format!(
            "the authorization server refused {what} ({status}): {}{}",
            error.escape_default(),
            error_description
                .map(|d| format!(": {}", d.escape_default()))
                .unwrap_or_default()
        ),
        Err(_) => format!("the authorization server refused {what} ({status})"),
    }
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn a_refusal_names_the_oauth_error() {
        let body = br#"{"error":"invalid_grant","error_description":"JWT assertion is expired"}"#;
        assert_eq!(
            refusal(reqwest::StatusCode::BAD_REQUEST, body, "the workload's JWT"),
            "the authorization server refused the workload's JWT (400 Bad Request): invalid_grant: JWT assertion is expired"
        );
        assert_eq!(
            refusal(
                reqwest::StatusCode::BAD_GATEWAY,
                b"<html>",
                "the workload's JWT"
            ),
            "the authorization server refused the workload's JWT (502 Bad Gateway)"
        );
    }
}
