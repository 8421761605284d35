//! The authorization-code flow in two steps, for a caller that serves the
//! redirect itself (SMS's console): [`begin_login`] gives the address to
//! send the browser to and the [`PendingLogin`] to keep, named by the
//! request's `state`; [`PendingLogin::finish`] takes the address the
//! browser came back to. [`crate::Authorizer`] runs the same two steps
//! around a loopback listener.

use rmcp::transport::auth::{AuthorizationRequest, OAuthState};
use rmcp::transport::AuthorizationManager;

use crate::{ClientConfig, OAuthError};

/// The name a dynamically registered client gets.
const CLIENT_NAME: &str = "Spear";

/// A login sent to the authorization server, waiting for the browser to
/// come back. Holds the PKCE verifier: keep it in memory only.
pub struct PendingLogin {
    state: OAuthState,
    /// The `state` parameter of the authorization request.
    pub state_param: String,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingLogin")
    }
}

/// Starts a login to the server at `server_url` as `client`, the browser
/// to come back to `redirect_uri`: the pending login and the address to
/// send the browser to. `challenge` is a 401's `WWW-Authenticate`, if any.
pub async fn begin_login(
    server_url: &str,
    client: &ClientConfig,
    redirect_uri: &str,
    challenge: Option<&str>,
    scopes: &[String],
) -> Result<(PendingLogin, String), OAuthError> {
    let mut state = match &client.dpop {
        // Token requests carry proofs only where the authorization server
        // takes them; every request goes through the client's network.
        Some(key) if takes_dpop(server_url, challenge, client).await? => {
            let http = crate::dpop::DpopHttpClient::new(
                std::sync::Arc::clone(key),
                client.network.clone(),
            );
            OAuthState::new_with_oauth_http_client(server_url, std::sync::Arc::new(http)).await?
        }
        _ => {
            let http = std::sync::Arc::new(client.network.clone());
            OAuthState::new_with_oauth_http_client(server_url, http).await?
        }
    };
    let mut request = AuthorizationRequest::new(redirect_uri).with_client_name(CLIENT_NAME);
    if let Some(id) = &client.client_id {
        request = request.with_preregistered_client(id);
        if let Some(secret) = &client.client_secret {
            request = request.with_client_secret(secret.expose());
        }
    }
    if let Some(url) = &client.client_metadata_url {
        request = request.with_client_metadata_url(url);
    }
    if !scopes.is_empty() {
        request = request.with_scopes(scopes.iter().cloned());
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    state.start_authorization(request).await?;
    let url = state.get_authorization_url().await?;
    let state_param = query_value(&url, "state").ok_or_else(|| {
        OAuthError::Flow("the authorization address carries no state parameter".into())
    })?;
    Ok((PendingLogin { state, state_param }, url))
}

/// Whether the server's authorization server takes ES256 DPoP proofs, as
/// its metadata says (found through the client's network).
async fn takes_dpop(
    server_url: &str,
    challenge: Option<&str>,
    client: &ClientConfig,
) -> Result<bool, OAuthError> {
    let manager = client.network.manager(server_url).await?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge)
        .await?
        .metadata;
    Ok(metadata
        .additional_fields
        .get("dpop_signing_alg_values_supported")
        .and_then(|algs| algs.as_array())
        .is_some_and(|algs| algs.iter().any(|a| a == "ES256")))
}

impl PendingLogin {
    /// Completes the login with the address the browser came back to
    /// (its code, or the error the authorization server sent).
    pub async fn finish(mut self, callback_url: &str) -> Result<AuthorizationManager, OAuthError> {
        crate::redirect::refused(callback_url)?;
        self.state.handle_callback_url(callback_url).await?;
        self.state
            .into_authorization_manager()
            .ok_or_else(|| OAuthError::Flow("the authorization did not complete".into()))
    }
}

/// The value of `name` in `url`'s query, decoded.
pub fn query_value(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_read_decoded() {
        let url = "https://as.example/authorize?client_id=a&state=x%2By&redirect_uri=http%3A%2F%2Fh%2Fcb#frag";
        assert_eq!(query_value(url, "state").as_deref(), Some("x+y"));
        assert_eq!(
            query_value(url, "redirect_uri").as_deref(),
            Some("http://h/cb")
        );
        assert_eq!(query_value(url, "missing"), None);
        assert_eq!(query_value("https://h/no-query", "state"), None);
    }
}
