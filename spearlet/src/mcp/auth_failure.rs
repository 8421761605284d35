//! Why a request to a remote server failed on its credentials, in one
//! sentence: found anywhere in an error's chain (rmcp wraps the
//! transport's errors), whether a token source refused, the server
//! answered 401, or it wanted a scope the token lacks.

use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

type HttpError = StreamableHttpError<reqwest::Error>;

/// The sentence for a request that failed on its credentials, if that is
/// why `error` (anywhere in its chain) failed.
pub fn auth_failure(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(http) = error.downcast_ref::<HttpError>() {
            match http {
                StreamableHttpError::Auth(AuthError::AuthorizationFailed(sentence)) => {
                    return Some(sentence.clone())
                }
                StreamableHttpError::Auth(other) => return Some(spear_oauth::describe(other)),
                StreamableHttpError::AuthRequired(_) => {
                    return Some(
                        "the server answered 401 Unauthorized: it needs an OAuth token, and none was given: declare \"auth\" in its server file, or, for an ad-hoc `spearlet mcp --url`, pass --oauth".into(),
                    )
                }
                StreamableHttpError::InsufficientScope(e) => {
                    return Some(insufficient_scope(&e.www_authenticate_header))
                }
                _ => {}
            }
        }
        current = error.source();
    }
    None
}

/// The sentence for a 403 `insufficient_scope`, with the scope the server
/// named (or its description, when it named none).
pub(crate) fn insufficient_scope(challenge: &str) -> String {
    let params = url::Url::parse("http://server.invalid/")
        .map(|base| spear_oauth::WWWAuthenticateParams::parse(challenge, &base))
        .unwrap_or_default();
    match (params.scope, params.error_description) {
        (Some(scope), _) => format!(
            "the server answered 403 insufficient_scope: it wants scope '{scope}', which the token does not hold (the login did not ask for it, or the authorization server did not grant it)"
        ),
        (None, description) => format!(
            "the server answered 403 insufficient_scope without naming a scope ({}); list the scopes it needs in auth.scopes",
            description.as_deref().unwrap_or("no description")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::insufficient_scope;

    #[test]
    fn a_403_names_the_scope_or_says_where_to_list_it() {
        assert_eq!(
            insufficient_scope(r#"Bearer error="insufficient_scope", scope="files:write""#),
            "the server answered 403 insufficient_scope: it wants scope 'files:write', which the token does not hold (the login did not ask for it, or the authorization server did not grant it)"
        );
        assert_eq!(
            insufficient_scope(
                r#"Bearer error="insufficient_scope", error_description="Required scope: docs:read""#
            ),
            "the server answered 403 insufficient_scope without naming a scope (Required scope: docs:read); list the scopes it needs in auth.scopes"
        );
    }
}
