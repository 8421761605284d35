//! `"auth"`: OAuth 2.1 for a remote server. Its secrets may only be
//! `${NAME}` references (resolved by SMS from its own environment when it
//! runs the grant; never stored or shown in clear).

use serde_json::{Map, Value};
use spear_proto::refs::sole_reference;
use spear_proto::v1::{EnterpriseIdp, OAuth, OauthGrant, ServerSpec, Transport};

use super::values::{object, string, string_list, Problems};

/// `object.key`, a secret: one `${NAME}` reference or nothing.
fn secret(problems: &mut Problems, at: &str, object: &Map<String, Value>, key: &str) -> String {
    let value = string(problems, at, object, key).unwrap_or_default();
    if !value.is_empty() && sole_reference(&value).is_none() {
        problems.push(
            &format!("{at}.{key}"),
            "a secret is written as one ${NAME} reference to SMS's environment (no default, no literal text)",
        );
    }
    value
}

fn is_loopback_http(url: &str) -> bool {
    ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|prefix| {
            url.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
        })
}

const AUTH_KEYS: &[&str] = &[
    "grant",
    "client_id",
    "client_secret",
    "client_metadata_url",
    "scopes",
    "private_key",
    "signing_algorithm",
    "idp",
    "assertion",
    "subject_token_type",
    "per_principal",
];

const IDP_KEYS: &[&str] = &[
    "issuer",
    "token_endpoint",
    "client_id",
    "client_secret",
    "id_token",
];

/// Parses `entry.auth`, if present, reporting each problem at its path.
pub(super) fn auth(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    spec: &ServerSpec,
) -> Option<OAuth> {
    let object = object(problems, path, entry, "auth", AUTH_KEYS)?;
    let at = format!("{path}.auth");
    if Transport::try_from(spec.transport) != Ok(Transport::StreamableHttp) {
        problems.push(
            &at,
            "OAuth is for Streamable HTTP servers (a \"url\"); a stdio or legacy SSE server takes its credentials in env or headers",
        );
    }
    let grant = match string(problems, &at, object, "grant").as_deref() {
        None | Some("authorization_code") => OauthGrant::AuthorizationCode,
        Some("client_credentials") => OauthGrant::ClientCredentials,
        Some("enterprise_managed") => OauthGrant::EnterpriseManaged,
        Some("jwt_bearer") => OauthGrant::JwtBearer,
        Some("token_exchange") => OauthGrant::TokenExchange,
        Some(other) => {
            problems.push(
                &format!("{at}.grant"),
                format!(
                    "unknown grant '{}'; use authorization_code, client_credentials, enterprise_managed, jwt_bearer or token_exchange",
                    other.escape_default()
                ),
            );
            OauthGrant::AuthorizationCode
        }
    };
    let client_secret = secret(problems, &at, object, "client_secret");
    let private_key = secret(problems, &at, object, "private_key");
    let idp = super::values::object(problems, &at, object, "idp", IDP_KEYS).map(|idp| {
        let at = format!("{at}.idp");
        for key in ["issuer", "token_endpoint"] {
            let url = string(problems, &at, idp, key).unwrap_or_default();
            if !(url.is_empty() || url.starts_with("https://") || is_loopback_http(&url)) {
                problems.push(
                    &format!("{at}.{key}"),
                    "an identity provider is reached over https:// (http:// only on loopback)",
                );
            }
        }
        EnterpriseIdp {
            issuer: string(problems, &at, idp, "issuer").unwrap_or_default(),
            token_endpoint: string(problems, &at, idp, "token_endpoint").unwrap_or_default(),
            client_id: string(problems, &at, idp, "client_id").unwrap_or_default(),
            client_secret: secret(problems, &at, idp, "client_secret"),
            id_token: secret(problems, &at, idp, "id_token"),
        }
    });
    let client_metadata_url =
        string(problems, &at, object, "client_metadata_url").unwrap_or_default();
    if !client_metadata_url.is_empty() && !client_metadata_url.starts_with("https://") {
        problems.push(
            &format!("{at}.client_metadata_url"),
            "a Client ID Metadata Document is served over https://",
        );
    }
    let auth = OAuth {
        grant: grant as i32,
        client_id: string(problems, &at, object, "client_id").unwrap_or_default(),
        client_secret,
        client_metadata_url,
        scopes: string_list(problems, &at, object, "scopes", false).unwrap_or_default(),
        private_key,
        signing_algorithm: string(problems, &at, object, "signing_algorithm").unwrap_or_default(),
        idp,
        assertion: secret(problems, &at, object, "assertion"),
        subject_token_type: string(problems, &at, object, "subject_token_type").unwrap_or_default(),
        per_principal: super::values::boolean(problems, &at, object, "per_principal")
            .unwrap_or(false),
    };
    if let Err(error) = spear_oauth::check_spec(&auth) {
        problems.push(path, error.to_string());
    }
    Some(auth)
}
