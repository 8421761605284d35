//! Token exchange (RFC 8693) for a server that acts per principal: the
//! person's own token as `subject_token`, the workload acting for them (a
//! node, in a JWT SMS issues for that authorization server alone) as
//! `actor_token`, and the server's URL as the resource. The token issued
//! says `sub` = the person and `act` = the node, so the upstream knows
//! both who asked and who acts. Entry point: [`token_exchange`].
//!
//! The request is made once: a refusal (the person never connected their
//! account, their grant was revoked, their token expired) is the answer,
//! never retried with another credential.

use crate::grant_request::{discover, post, Granted};
use crate::{ClientConfig, OAuthError};

/// The grant's registered name (RFC 8693 §2.1).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The actor's token type: a JWT (RFC 8693 §3).
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The subject token types a server file may name (`auth.subject_token_type`),
/// and their URIs; the first is the default.
pub const SUBJECT_TOKEN_TYPES: &[(&str, &str)] = &[
    ("id_token", "urn:ietf:params:oauth:token-type:id_token"),
    ("access_token", ACCESS_TOKEN_TYPE),
    ("jwt", JWT_TYPE),
];

/// The URI of `name` (empty: the default), if it is one of
/// [`SUBJECT_TOKEN_TYPES`].
pub fn subject_token_type(name: &str) -> Option<&'static str> {
    let name = if name.is_empty() { "id_token" } else { name };
    SUBJECT_TOKEN_TYPES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, uri)| *uri)
}

/// A person's token, and what it is.
pub struct Subject<'a> {
    pub token: &'a str,
    /// One of [`SUBJECT_TOKEN_TYPES`]' names.
    pub token_type: &'a str,
}

/// An access token for `server_url` that acts for `subject`, with the
/// actor's JWT made by `mint_actor` for the authorization server it is
/// given (its issuer).
pub async fn token_exchange(
    server_url: &str,
    client: &ClientConfig,
    subject: Subject<'_>,
    mint_actor: &(dyn Fn(&str) -> Result<String, OAuthError> + Sync),
) -> Result<Granted, OAuthError> {
    let subject_type = subject_token_type(subject.token_type).ok_or(OAuthError::Config {
        field: "subject_token_type",
        why: format!(
            "'{}' is not a token type; use id_token, access_token or jwt",
            subject.token_type.escape_default()
        ),
    })?;
    let (_, metadata, scopes) = discover(server_url, None, &client.scopes, &client.network).await?;
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    issued_there(subject.token, &audience)?;
    let actor = mint_actor(&audience)?;
    let form = vec![
        ("grant_type", GRANT_TYPE),
        ("subject_token", subject.token),
        ("subject_token_type", subject_type),
        ("actor_token", actor.as_str()),
        ("actor_token_type", JWT_TYPE),
        ("requested_token_type", ACCESS_TOKEN_TYPE),
        ("resource", server_url),
    ];
    post(
        &metadata.token_endpoint,
        form,
        client,
        scopes,
        "the token exchange",
    )
    .await
}

/// Refuses to send the person's token to an authorization server that did
/// not issue it: the MCP server names its authorization server, so a
/// hostile one could otherwise collect people's tokens (good at SMS
/// itself). The token must be a JWT whose `iss` is that server's issuer.
fn issued_there(token: &str, issuer: &str) -> Result<(), OAuthError> {
    let trim = |s: &str| s.trim_end_matches('/').to_string();
    let iss = crate::grant_request::unverified_claims(token)
        .and_then(|claims| claims["iss"].as_str().map(str::to_string));
    match iss {
        Some(iss) if trim(&iss) == trim(issuer) => Ok(()),
        Some(iss) => Err(OAuthError::Flow(format!(
            "the server's authorization server is {issuer}, and the person's token was issued by {iss}: it is exchanged only where it was issued, so it is not sent there"
        ))),
        None => Err(OAuthError::Flow(
            "the person's token is not a JWT naming its issuer, so SMS cannot tell it belongs at the server's authorization server; it is not sent".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{issued_there, subject_token_type};

    fn jwt(claims: &str) -> String {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b64(r#"{"alg":"ES256"}"#), b64(claims))
    }

    #[test]
    fn a_person_s_token_goes_only_to_the_issuer_that_made_it() {
        let token = jwt(r#"{"iss":"https://login.example/","sub":"alice"}"#);
        assert!(issued_there(&token, "https://login.example").is_ok());
        let elsewhere = issued_there(&token, "https://evil.example").unwrap_err();
        assert!(
            elsewhere.to_string().contains("it is not sent there"),
            "{elsewhere}"
        );
        assert!(issued_there("opaque-access-token", "https://login.example").is_err());
    }

    #[test]
    fn subject_token_types_are_the_rfc_s() {
        assert_eq!(
            subject_token_type(""),
            Some("urn:ietf:params:oauth:token-type:id_token")
        );
        assert_eq!(
            subject_token_type("access_token"),
            Some("urn:ietf:params:oauth:token-type:access_token")
        );
        assert_eq!(subject_token_type("saml2"), None);
    }
}
