//! A credential after a login: what is kept to use and renew it, and the
//! renewal itself. The kept form is rmcp's [`StoredCredentials`] (the
//! client id, the token response with its refresh token, the granted
//! scopes, when it was received), serializable and redacted in `Debug`;
//! SMS seals it, `spearlet mcp` holds it in memory.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthError, CredentialStore, InMemoryCredentialStore, OAuthClientConfig, StoredCredentials,
};
use rmcp::transport::AuthorizationManager;

use crate::{ClientConfig, OAuthError};

/// rmcp asks every client for a redirect URI; a refresh never uses it.
const UNUSED_REDIRECT: &str = "http://127.0.0.1/callback";

/// `manager` (its metadata set) holding `access_token`, obtained outside
/// its own flows (an enterprise exchange, a JWT bearer grant), as if it
/// had made the exchange: [`held`] keeps it, and refreshes find it.
pub(crate) async fn hold(
    mut manager: AuthorizationManager,
    client_id: &str,
    access_token: String,
    token_type: oauth2::basic::BasicTokenType,
    expires_in: Option<Duration>,
    scopes: Vec<String>,
) -> Result<AuthorizationManager, OAuthError> {
    let mut response = rmcp::transport::auth::OAuthTokenResponse::new(
        oauth2::AccessToken::new(access_token),
        token_type,
        rmcp::transport::auth::VendorExtraTokenFields::default(),
    );
    response.set_expires_in(expires_in.as_ref());
    let store = InMemoryCredentialStore::new();
    store
        .save(StoredCredentials::new(
            client_id.to_string(),
            Some(response),
            scopes,
            Some(now_secs()),
        ))
        .await?;
    manager.set_credential_store(store);
    manager.configure_client_id(client_id)?;
    Ok(manager)
}

/// Whether `manager`'s token is bound to a key (`token_type` DPoP, RFC
/// 9449): it is presented with a proof, not as a bearer.
pub async fn dpop_bound(manager: &AuthorizationManager) -> bool {
    match manager.get_credentials().await {
        Ok((_, Some(response))) => response.token_type().as_ref().eq_ignore_ascii_case("dpop"),
        _ => false,
    }
}

/// What `manager` holds after an authorization, to keep.
pub async fn held(manager: &AuthorizationManager) -> Result<StoredCredentials, OAuthError> {
    let (client_id, response) = manager.get_credentials().await?;
    let response =
        response.ok_or_else(|| OAuthError::Flow("the login obtained no token".into()))?;
    Ok(StoredCredentials::new(
        client_id,
        Some(response),
        manager.get_current_scopes().await,
        Some(now_secs()),
    ))
}

/// The access token in `held`, if any.
pub fn access_token(held: &StoredCredentials) -> Option<&str> {
    held.token_response
        .as_ref()
        .map(|r| r.access_token().secret().as_str())
}

/// Whether `held` carries a refresh token.
pub fn has_refresh_token(held: &StoredCredentials) -> bool {
    held.token_response
        .as_ref()
        .is_some_and(|r| r.refresh_token().is_some())
}

/// When the access token in `held` expires, if the server said.
pub fn expires_at(held: &StoredCredentials) -> Option<SystemTime> {
    let lifetime = held.token_response.as_ref()?.expires_in()?;
    let received = UNIX_EPOCH + Duration::from_secs(held.token_received_at?);
    Some(received + lifetime)
}

/// How a node names a token its server refused, to SMS, without sending
/// it back: its SHA-256 in hex.
pub fn token_digest(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// The most a token is renewed ahead of its expiry.
const RENEW_AHEAD: Duration = Duration::from_secs(30);

/// When a token received at `received` that expires at `expires` is due
/// for renewal: 30 s before it expires, or half its life before if that is
/// shorter, so no request leaves with a token about to lapse. SMS and
/// nodes use the same rule, so a node never asks for a token SMS would
/// hand back unchanged.
pub fn renew_at(received: SystemTime, expires: SystemTime) -> SystemTime {
    let life = expires.duration_since(received).unwrap_or_default();
    expires - RENEW_AHEAD.min(life / 2)
}

/// When `held` is due for renewal (see [`renew_at`]); `None` when the
/// server gave no lifetime (it is renewed when a server refuses it).
pub fn due_at(held: &StoredCredentials) -> Option<SystemTime> {
    let received = UNIX_EPOCH + Duration::from_secs(held.token_received_at?);
    Some(renew_at(received, expires_at(held)?))
}

/// Renews `held` with its refresh token at the authorization server of
/// `server_url` (discovered afresh, so a moved server is followed): the
/// new credential, with the rotated refresh token when the server
/// rotates. A refused refresh token is [`OAuthError::RefreshRefused`].
pub async fn refresh(
    server_url: &str,
    client: &ClientConfig,
    held: StoredCredentials,
) -> Result<StoredCredentials, OAuthError> {
    let mut manager = client.network.manager(server_url).await?;
    let resolution = manager.resolve_metadata().await?;
    manager.set_metadata(resolution.metadata);
    let mut config = OAuthClientConfig::new(held.client_id.clone(), UNUSED_REDIRECT);
    // The configured secret belongs to the configured client only.
    if client.client_id.as_deref() == Some(held.client_id.as_str()) {
        if let Some(secret) = &client.client_secret {
            config = config.with_client_secret(secret.expose());
        }
    }
    manager.configure_client(config)?;
    let store = InMemoryCredentialStore::new();
    store.save(held).await?;
    manager.set_credential_store(store.clone());
    match manager.refresh_token().await {
        Ok(_) => {}
        Err(error @ AuthError::TokenRefreshRejected(_)) => {
            return Err(OAuthError::RefreshRefused(format!(
                "the authorization server refused the refresh token ({error})"
            )))
        }
        Err(AuthError::AuthorizationRequired) => {
            return Err(OAuthError::RefreshRefused(
                "the authorization server wants a new authorization".into(),
            ))
        }
        Err(error) => return Err(error.into()),
    }
    store
        .load()
        .await?
        .ok_or_else(|| OAuthError::Flow("the refresh kept no token".into()))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_ahead_of_expiry_by_at_most_half_their_life() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = t0 + Duration::from_secs(3600);
        assert_eq!(renew_at(t0, hour), hour - Duration::from_secs(30));
        let short = t0 + Duration::from_secs(4);
        assert_eq!(renew_at(t0, short), t0 + Duration::from_secs(2));
        assert_eq!(renew_at(t0, t0), t0, "already expired");
    }
}
