//! A person signing in at an OpenID Connect issuer through a web page (the
//! console): the authorization code flow with PKCE (S256) and a nonce, for
//! the public client SMS's audience names. Entry point: [`begin_sign_in`],
//! whose [`SignIn::url`] the browser goes to; [`SignIn::finish`] trades
//! the code it comes back with for the person's ID token, which the caller
//! verifies (signature, issuer, audience, and [`SignIn::nonce`]).

use oauth2::{CsrfToken, PkceCodeChallenge, PkceCodeVerifier};
use serde::Deserialize;

use crate::grant_request::send;
use crate::OAuthError;

/// A sign-in the browser has been sent to start. `Debug` shows none of
/// its values.
pub struct SignIn {
    /// Where the browser goes.
    pub url: String,
    /// The authorization request's `state`: the key the callback is
    /// matched by, once.
    pub state: String,
    nonce: String,
    verifier: PkceCodeVerifier,
    client_id: String,
    redirect_uri: String,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignIn")
    }
}

#[derive(Deserialize)]
struct Tokens {
    #[serde(default)]
    id_token: Option<String>,
}

/// A sign-in of `client_id` at `authorization_endpoint`, coming back to
/// `redirect_uri`, asking for `openid` and `scopes`.
pub fn begin_sign_in(
    authorization_endpoint: &str,
    client_id: &str,
    redirect_uri: &str,
    scopes: &[&str],
) -> Result<SignIn, OAuthError> {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let state = CsrfToken::new_random().secret().clone();
    let nonce = CsrfToken::new_random().secret().clone();
    let mut url = url::Url::parse(authorization_endpoint).map_err(|e| {
        OAuthError::Flow(format!(
            "the issuer's authorization endpoint is not a URL: {e}"
        ))
    })?;
    let scope = std::iter::once("openid")
        .chain(scopes.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", &scope)
        .append_pair("state", &state)
        .append_pair("nonce", &nonce)
        .append_pair("code_challenge", challenge.as_str())
        .append_pair("code_challenge_method", challenge.method().as_str());
    Ok(SignIn {
        url: url.into(),
        state,
        nonce,
        verifier,
        client_id: client_id.to_string(),
        redirect_uri: redirect_uri.to_string(),
    })
}

impl SignIn {
    /// The nonce the ID token must carry.
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// The ID token `code` buys at `token_endpoint`.
    pub async fn finish(self, token_endpoint: &str, code: &str) -> Result<String, OAuthError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("client_id", self.client_id.as_str()),
            ("code_verifier", self.verifier.secret().as_str()),
        ];
        // The issuer is the operator's own, named in SMS's flags.
        let network = crate::Network::unguarded();
        let body = send(token_endpoint, &form, None, "the sign-in's code", &network).await?;
        let tokens: Tokens = serde_json::from_slice(&body).map_err(|_| {
            OAuthError::Flow("the issuer's token response is not a token response".into())
        })?;
        tokens.id_token.ok_or_else(|| {
            OAuthError::Flow(
                "the issuer answered without an ID token (was `openid` granted?)".into(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::begin_sign_in;

    #[test]
    fn the_authorization_request_asks_for_a_code_with_pkce_and_a_nonce() {
        let sign_in = begin_sign_in(
            "https://login.example/authorize",
            "spear-people",
            "https://sms.example/login/oidc/callback",
            &["groups"],
        )
        .unwrap();
        let url = url::Url::parse(&sign_in.url).unwrap();
        let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(query["response_type"], "code");
        assert_eq!(query["scope"], "openid groups");
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(query["state"], sign_in.state);
        assert_eq!(query["nonce"], sign_in.nonce());
        assert_ne!(sign_in.state, sign_in.nonce());
        assert!(!sign_in.url.contains(sign_in.verifier.secret()));
    }
}
