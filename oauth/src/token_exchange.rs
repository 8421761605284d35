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
    let (_, metadata, scopes) = discover(server_url, None, &client.scopes).await?;
    let audience = metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
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

#[cfg(test)]
mod tests {
    use super::subject_token_type;

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
