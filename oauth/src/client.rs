//! Who the client is: a server file's `auth` with its `${NAME}`
//! references resolved where the grant runs.

use spear_proto::v1::{OAuth, OauthGrant};

use crate::OAuthError;

/// A value that must not be shown: its `Debug` says so instead.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// How tokens are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// An operator authorizes in a browser; refresh tokens keep it going.
    AuthorizationCode,
    /// The client's own credentials buy each token.
    ClientCredentials,
    /// An enterprise ID token, exchanged at the identity provider for an
    /// identity assertion grant the server's authorization server takes
    /// (SEP-990).
    EnterpriseManaged,
    /// A JWT the workload's platform issued, traded for a token with the
    /// RFC 7523 JWT bearer grant (workload identity federation, SEP-1933).
    JwtBearer,
    /// Per principal: SMS exchanges the invoking person's token, with the
    /// node as actor (RFC 8693), or uses the node's own workload JWT.
    TokenExchange,
}

impl Grant {
    /// Whether a person must log in for it.
    pub fn needs_login(self) -> bool {
        self == Grant::AuthorizationCode
    }
}

/// The identity provider of an enterprise-managed grant, its secrets resolved.
#[derive(Debug, Clone)]
pub struct IdpConfig {
    pub issuer: String,
    pub token_endpoint: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// The enterprise ID token to exchange.
    pub id_token: Secret,
}

/// The signing algorithms rmcp offers for `private_key_jwt`.
const SIGNING_ALGORITHMS: [&str; 5] = ["RS256", "RS384", "RS512", "ES256", "ES384"];

/// A client, ready for an [`Authorizer`](crate::Authorizer).
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub grant: Grant,
    /// A pre-registered client id.
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    /// A Client ID Metadata Document URL, used where the server supports it.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty lets the challenge or metadata decide.
    pub scopes: Vec<String>,
    /// A PEM key and its algorithm for `private_key_jwt`.
    pub private_key: Option<(Secret, String)>,
    /// The identity provider, for [`Grant::EnterpriseManaged`].
    pub idp: Option<IdpConfig>,
    /// The workload's JWT, for [`Grant::JwtBearer`].
    pub assertion: Option<Secret>,
    /// A key to bind tokens to (DPoP), used with an authorization server
    /// that takes proofs; `None`: bearer tokens only.
    pub dpop: Option<std::sync::Arc<crate::dpop::DpopKey>>,
    /// Where the flow's requests may go: public addresses only unless the
    /// caller sets SMS's allow-list (or, on an operator's own terminal,
    /// [`Network::unguarded`](crate::Network::unguarded)).
    pub network: crate::Network,
}

/// Why a resolver could not give a field's value: whatever error its
/// lookup has (a reference not set, a literal where a reference belongs).
pub type Unresolved = Box<dyn std::error::Error + Send + Sync>;

impl ClientConfig {
    /// `auth` with `client_secret` and `private_key` resolved by `resolve`
    /// (given the field's name and its text; its error is the resolver's
    /// own, and names the field only).
    pub fn from_spec(
        auth: &OAuth,
        resolve: &dyn Fn(&'static str, &str) -> Result<String, Unresolved>,
    ) -> Result<ClientConfig, OAuthError> {
        check_spec(auth)?;
        let secret = |field: &'static str, text: &str| -> Result<Option<Secret>, OAuthError> {
            if text.is_empty() {
                return Ok(None);
            }
            let value = resolve(field, text).map_err(|why| OAuthError::Config {
                field,
                why: why.to_string(),
            })?;
            Ok(Some(Secret::new(value)))
        };
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let private_key = match (secret("private_key", &auth.private_key)?, algorithm(auth)) {
            (Some(key), Some(algorithm)) => Some((key, algorithm.to_string())),
            _ => None,
        };
        let idp = match (&auth.idp, grant(auth)) {
            (Some(idp), Grant::EnterpriseManaged) => Some(IdpConfig {
                issuer: idp.issuer.clone(),
                token_endpoint: idp.token_endpoint.clone(),
                client_id: idp.client_id.clone(),
                client_secret: secret("idp.client_secret", &idp.client_secret)?,
                id_token: secret("idp.id_token", &idp.id_token)?.ok_or(OAuthError::Config {
                    field: "idp.id_token",
                    why: "enterprise_managed needs the ID token to exchange".into(),
                })?,
            }),
            _ => None,
        };
        let assertion = match grant(auth) {
            Grant::JwtBearer => secret("assertion", &auth.assertion)?,
            _ => None,
        };
        Ok(ClientConfig {
            idp,
            assertion,
            dpop: None,
            network: crate::Network::default(),
            grant: grant(auth),
            client_id: nonempty(&auth.client_id),
            client_secret: secret("client_secret", &auth.client_secret)?,
            client_metadata_url: nonempty(&auth.client_metadata_url),
            scopes: auth.scopes.clone(),
            private_key,
        })
    }
}

impl ClientConfig {
    /// [`ClientConfig::from_spec`] with each `${NAME}` looked up by
    /// `lookup`; `place` ends a failure's sentence ("in SMS's environment;
    /// set it where SMS runs").
    pub fn from_environment(
        auth: &OAuth,
        lookup: &dyn Fn(&str) -> Option<String>,
        place: &str,
    ) -> Result<ClientConfig, OAuthError> {
        ClientConfig::from_spec(auth, &|_, text| {
            spear_proto::refs::substitute(text, lookup)
                .map_err(|e| Unresolved::from(format!("{e} in {place}")))
        })
    }
}

fn grant(auth: &OAuth) -> Grant {
    match OauthGrant::try_from(auth.grant) {
        Ok(OauthGrant::ClientCredentials) => Grant::ClientCredentials,
        Ok(OauthGrant::EnterpriseManaged) => Grant::EnterpriseManaged,
        Ok(OauthGrant::JwtBearer) => Grant::JwtBearer,
        Ok(OauthGrant::TokenExchange) => Grant::TokenExchange,
        _ => Grant::AuthorizationCode,
    }
}

/// The signing algorithm of `auth`'s private key (RS256 unless named), if it has one.
fn algorithm(auth: &OAuth) -> Option<&str> {
    match (auth.private_key.is_empty(), auth.signing_algorithm.as_str()) {
        (true, _) => None,
        (false, "") => Some("RS256"),
        (false, named) => Some(named),
    }
}

/// Checks the shape of a server file's `auth` (no value is resolved): a
/// secret needs a client id, client credentials need a secret or a key,
/// and a key needs an algorithm rmcp signs with. SMS checks this when it
/// reads a server file; [`ClientConfig::from_spec`] before any request.
pub fn check_spec(auth: &OAuth) -> Result<(), OAuthError> {
    let has_id = !auth.client_id.is_empty();
    let has_secret = !auth.client_secret.is_empty();
    if has_secret && !has_id {
        return Err(OAuthError::Config {
            field: "client_secret",
            why: "a client secret belongs to a pre-registered client; give its client_id too"
                .into(),
        });
    }
    if let Some(algorithm) = algorithm(auth) {
        if !SIGNING_ALGORITHMS.contains(&algorithm) {
            return Err(OAuthError::Config {
                field: "signing_algorithm",
                why: format!(
                    "'{algorithm}' is not one of {}",
                    SIGNING_ALGORITHMS.join(", ")
                ),
            });
        }
        if grant(auth) != Grant::ClientCredentials {
            return Err(OAuthError::Config {
                field: "private_key",
                why: "a private key signs client-credentials requests; set grant to client_credentials".into(),
            });
        }
    }
    if grant(auth) == Grant::ClientCredentials
        && !(has_id && (has_secret || algorithm(auth).is_some()))
    {
        return Err(OAuthError::Config {
            field: "grant",
            why: "client_credentials needs a client_id with a client_secret or a private_key"
                .into(),
        });
    }
    if grant(auth) == Grant::JwtBearer && auth.assertion.is_empty() {
        return Err(OAuthError::Config {
            field: "grant",
            why: "jwt_bearer needs the workload's JWT in assertion".into(),
        });
    }
    if grant(auth) == Grant::TokenExchange
        && crate::subject_token_type(&auth.subject_token_type).is_none()
    {
        return Err(OAuthError::Config {
            field: "subject_token_type",
            why: format!(
                "'{}' is not a token type; use id_token, access_token or jwt",
                auth.subject_token_type.escape_default()
            ),
        });
    }
    if auth.per_principal && grant(auth) != Grant::AuthorizationCode {
        return Err(OAuthError::Config {
            field: "per_principal",
            why: "is for the authorization_code grant (each person logs in); token_exchange acts per principal already, and the other grants have no person".into(),
        });
    }
    if grant(auth) != Grant::TokenExchange && !auth.subject_token_type.is_empty() {
        return Err(OAuthError::Config {
            field: "subject_token_type",
            why: "is for the token_exchange grant".into(),
        });
    }
    if grant(auth) == Grant::EnterpriseManaged {
        let idp = auth.idp.clone().unwrap_or_default();
        let missing = [
            ("client_id", auth.client_id.is_empty()),
            ("idp.issuer", idp.issuer.is_empty()),
            ("idp.token_endpoint", idp.token_endpoint.is_empty()),
            ("idp.client_id", idp.client_id.is_empty()),
            ("idp.id_token", idp.id_token.is_empty()),
        ];
        if let Some((field, _)) = missing.iter().find(|(_, empty)| *empty) {
            return Err(OAuthError::Config {
                field: "grant",
                why: format!("enterprise_managed needs {field}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(grant: OauthGrant) -> OAuth {
        OAuth {
            grant: grant as i32,
            ..Default::default()
        }
    }

    #[test]
    fn a_secret_without_a_client_id_is_refused_by_name() {
        let mut a = auth(OauthGrant::AuthorizationCode);
        a.client_secret = "${SECRET}".into();
        let error = check_spec(&a).unwrap_err().to_string();
        assert!(error.starts_with("auth.client_secret: "), "{error}");
        assert!(error.contains("client_id"), "{error}");
    }

    #[test]
    fn client_credentials_need_a_secret_or_a_key() {
        let mut a = auth(OauthGrant::ClientCredentials);
        a.client_id = "machine".into();
        assert!(check_spec(&a).is_err());
        a.client_secret = "${SECRET}".into();
        assert!(check_spec(&a).is_ok());
        a.client_secret.clear();
        a.private_key = "${KEY}".into();
        a.signing_algorithm = "HS256".into();
        let error = check_spec(&a).unwrap_err().to_string();
        assert!(error.contains("'HS256' is not one of RS256"), "{error}");
        a.signing_algorithm = "ES256".into();
        assert!(check_spec(&a).is_ok());
    }

    #[test]
    fn enterprise_managed_needs_both_clients_and_the_id_token() {
        let mut a = auth(OauthGrant::EnterpriseManaged);
        a.client_id = "mcp-client".into();
        let error = check_spec(&a).unwrap_err().to_string();
        assert!(
            error.contains("enterprise_managed needs idp.issuer"),
            "{error}"
        );
        a.idp = Some(spear_proto::v1::EnterpriseIdp {
            issuer: "https://idp.example".into(),
            token_endpoint: "https://idp.example/token".into(),
            client_id: "idp-client".into(),
            client_secret: String::new(),
            id_token: "${ID_TOKEN}".into(),
        });
        assert!(check_spec(&a).is_ok());
        let config = ClientConfig::from_spec(&a, &|_, _| Ok("eyJ-id-token".into())).unwrap();
        let idp = config.idp.unwrap();
        assert_eq!(idp.id_token.expose(), "eyJ-id-token");
        assert!(idp.client_secret.is_none());
    }

    #[test]
    fn resolved_secrets_do_not_show_in_debug_output() {
        let mut a = auth(OauthGrant::AuthorizationCode);
        a.client_id = "app".into();
        a.client_secret = "${SECRET}".into();
        let config = ClientConfig::from_spec(&a, &|_, _| Ok("hunter2-very-secret".into())).unwrap();
        assert_eq!(
            config.client_secret.as_ref().map(Secret::expose),
            Some("hunter2-very-secret")
        );
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn an_unresolvable_secret_names_its_field() {
        let mut a = auth(OauthGrant::AuthorizationCode);
        a.client_id = "app".into();
        a.client_secret = "${MISSING}".into();
        let error = ClientConfig::from_spec(&a, &|_, _| Err("MISSING is not set".into()))
            .unwrap_err()
            .to_string();
        assert_eq!(error, "auth.client_secret: MISSING is not set");
    }
}
