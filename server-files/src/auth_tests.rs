//! The `"auth"` rules of server files, as an operator meets them: secrets
//! only as references, each grant's required fields, per-principal servers.

use super::tests::{joined, problems};
use super::*;

#[test]
fn auth_is_read_with_its_secrets_as_references_only() {
    let specs = parse_file(
        "docs.json",
        br#"{"id": "docs", "url": "https://mcp.example.com/mcp",
             "auth": {"client_id": "spear-prod", "client_secret": "${DOCS_CLIENT_SECRET}",
                      "scopes": ["docs:read"]}}"#,
    )
    .unwrap();
    let auth = specs[0].auth.clone().unwrap();
    assert_eq!(
        auth.grant,
        spear_proto::v1::OauthGrant::AuthorizationCode as i32
    );
    assert_eq!(auth.client_id, "spear-prod");
    assert_eq!(auth.client_secret, "${DOCS_CLIENT_SECRET}");
    assert_eq!(auth.scopes, ["docs:read"]);

    let p = problems(
        "docs.json",
        r#"{"id": "docs", "url": "https://x/mcp",
            "auth": {"client_id": "a", "client_secret": "hunter2"}}"#,
    );
    assert_eq!(
        joined(&p),
        "docs.json: $.auth.client_secret: a secret is written as one ${NAME} reference to SMS's environment (no default, no literal text)"
    );
    assert!(!joined(&p).contains("hunter2"));
    let p = problems(
        "docs.json",
        r#"{"id": "docs", "url": "https://x/mcp",
            "auth": {"client_secret": "${S:-hunter2}"}}"#,
    );
    assert!(joined(&p).contains("no default"), "{}", joined(&p));
    assert!(!joined(&p).contains("hunter2"), "{}", joined(&p));

    let p = problems(
        "m2m.json",
        r#"{"id": "m2m", "url": "https://x/mcp", "auth": {"grant": "client_credentials"}}"#,
    );
    assert_eq!(
        joined(&p),
        "m2m.json: $: auth.grant: client_credentials needs a client_id with a client_secret or a private_key"
    );
    let p = problems(
        "fs.json",
        r#"{"id": "fs", "command": "x", "auth": {"client_id": "a"}}"#,
    );
    assert!(
        joined(&p).starts_with("fs.json: $.auth: OAuth is for Streamable HTTP servers"),
        "{}",
        joined(&p)
    );
    let p = problems(
        "docs.json",
        r#"{"id": "docs", "url": "https://x/mcp", "auth": {"grant": "implicit"}}"#,
    );
    assert!(
        joined(&p)
            .contains("unknown grant 'implicit'; use authorization_code, client_credentials, enterprise_managed, jwt_bearer or token_exchange"),
        "{}",
        joined(&p)
    );
}

#[test]
fn a_server_acting_per_person_names_what_the_person_s_token_is() {
    let specs = parse_file(
        "people.json",
        br#"{"id": "people", "url": "https://x/mcp", "auth": {"grant": "token_exchange", "client_id": "sms", "client_secret": "${SECRET}", "subject_token_type": "access_token"}}"#,
    )
    .unwrap_or_else(|p| panic!("{}", joined(&p)));
    let auth = specs[0].auth.clone().unwrap();
    assert_eq!(
        auth.grant,
        spear_proto::v1::OauthGrant::TokenExchange as i32
    );
    assert_eq!(auth.subject_token_type, "access_token");
    let p = problems(
        "people.json",
        r#"{"id": "people", "url": "https://x/mcp", "auth": {"grant": "token_exchange", "subject_token_type": "saml2"}}"#,
    );
    assert_eq!(
        joined(&p),
        "people.json: $: auth.subject_token_type: 'saml2' is not a token type; use id_token, access_token or jwt"
    );
    let p = problems(
        "docs.json",
        r#"{"id": "docs", "url": "https://x/mcp", "auth": {"subject_token_type": "id_token"}}"#,
    );
    assert_eq!(
        joined(&p),
        "docs.json: $: auth.subject_token_type: is for the token_exchange grant"
    );
    let p = problems(
        "m2m.json",
        r#"{"id": "m2m", "url": "https://x/mcp", "auth": {"grant": "client_credentials", "client_id": "a", "client_secret": "${S}", "per_principal": true}}"#,
    );
    assert!(
        joined(&p).contains("auth.per_principal: is for the authorization_code grant"),
        "{}",
        joined(&p)
    );
    let specs = parse_file(
        "docs.json",
        br#"{"id": "docs", "url": "https://x/mcp", "auth": {"per_principal": true}}"#,
    )
    .unwrap_or_else(|p| panic!("{}", joined(&p)));
    assert!(specs[0].auth.as_ref().unwrap().per_principal);
}

#[test]
fn enterprise_managed_auth_names_its_identity_provider() {
    let specs = parse_file(
        "crm.json",
        br#"{"id": "crm", "url": "https://mcp.crm.example/mcp",
             "auth": {"grant": "enterprise_managed", "client_id": "spear", "client_secret": "${CRM_SECRET}",
                      "idp": {"issuer": "https://sso.example", "token_endpoint": "https://sso.example/token",
                              "client_id": "spear-at-sso", "id_token": "${SSO_ID_TOKEN}"}}}"#,
    )
    .unwrap();
    let auth = specs[0].auth.clone().unwrap();
    assert_eq!(
        auth.grant,
        spear_proto::v1::OauthGrant::EnterpriseManaged as i32
    );
    let idp = auth.idp.unwrap();
    assert_eq!(idp.id_token, "${SSO_ID_TOKEN}");
    assert_eq!(idp.token_endpoint, "https://sso.example/token");

    let p = problems(
        "crm.json",
        r#"{"id": "crm", "url": "https://x/mcp",
            "auth": {"grant": "enterprise_managed", "client_id": "spear",
                     "idp": {"issuer": "http://sso.example", "token_endpoint": "https://sso.example/token",
                             "client_id": "c", "id_token": "eyJ-literal-token"}}}"#,
    );
    let text = joined(&p);
    assert!(
        text.contains("$.auth.idp.issuer: an identity provider is reached over https://"),
        "{text}"
    );
    assert!(
        text.contains("$.auth.idp.id_token: a secret is written as one ${NAME} reference"),
        "{text}"
    );
    assert!(!text.contains("eyJ-literal-token"), "{text}");
    let p = problems(
        "crm.json",
        r#"{"id": "crm", "url": "https://x/mcp", "auth": {"grant": "enterprise_managed", "client_id": "spear"}}"#,
    );
    assert!(
        joined(&p).contains("enterprise_managed needs idp.issuer"),
        "{}",
        joined(&p)
    );
}

#[test]
fn jwt_bearer_auth_takes_the_workload_jwt_as_a_reference_only() {
    let specs = parse_file(
        "wif.json",
        br#"{"id": "wif", "url": "https://mcp.wif.example/mcp",
             "auth": {"grant": "jwt_bearer", "client_id": "workload", "assertion": "${WORKLOAD_JWT}"}}"#,
    )
    .unwrap();
    let auth = specs[0].auth.clone().unwrap();
    assert_eq!(auth.grant, spear_proto::v1::OauthGrant::JwtBearer as i32);
    assert_eq!(auth.assertion, "${WORKLOAD_JWT}");

    let p = problems(
        "wif.json",
        r#"{"id": "wif", "url": "https://x/mcp", "auth": {"grant": "jwt_bearer", "assertion": "eyJ-literal-jwt"}}"#,
    );
    let text = joined(&p);
    assert!(
        text.contains("$.auth.assertion: a secret is written as one ${NAME} reference"),
        "{text}"
    );
    assert!(!text.contains("eyJ-literal-jwt"), "{text}");
    let p = problems(
        "wif.json",
        r#"{"id": "wif", "url": "https://x/mcp", "auth": {"grant": "jwt_bearer"}}"#,
    );
    assert!(
        joined(&p).contains("jwt_bearer needs the workload's JWT in assertion"),
        "{}",
        joined(&p)
    );
}
