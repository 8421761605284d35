//! The one error type of an authorization, each a sentence an operator can act on.

use rmcp::transport::auth::AuthError;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// A server file's `auth` that cannot be used as written.
    #[error("auth.{field}: {why}")]
    Config { field: &'static str, why: String },
    #[error("cannot listen for the authorization redirect on {addr}: {cause}; free the port or choose another with --redirect-port")]
    Listen { addr: String, cause: std::io::Error },
    #[error(
        "no authorization arrived within {0:?}; run the login again and finish it in the browser"
    )]
    LoginTimedOut(std::time::Duration),
    #[error("the authorization redirect did not carry a code: the authorization server answered '{error}'{description}")]
    Denied { error: String, description: String },
    #[error("could not read the pasted redirect URL: {0}")]
    Paste(String),
    #[error("the server still answers insufficient_scope after {0} step-ups; its operator must grant the scopes it asks for")]
    StepUpLimit(u32),
    /// The authorization server refused a refresh token for good (revoked,
    /// expired, or rotated away): only a new login helps.
    #[error("{0}")]
    RefreshRefused(String),
    /// The authorization server refused a grant request (its OAuth error
    /// code and description): the answer, never retried.
    #[error("{0}")]
    Refused(String),
    /// What rmcp reports, made into a sentence by [`describe`].
    #[error("{0}")]
    Flow(String),
}

impl From<AuthError> for OAuthError {
    fn from(error: AuthError) -> Self {
        OAuthError::Flow(describe(&error))
    }
}

/// A sentence for an rmcp authorization error. rmcp's own texts name what
/// failed (metadata, registration, token exchange) and never the secrets it
/// holds; a rejected refresh token gets the sentence that says what to do.
pub fn describe(error: &AuthError) -> String {
    match error {
        AuthError::AuthorizationRequired => {
            "the server needs an authorization and none is held; log in again".to_string()
        }
        AuthError::TokenRefreshRejected(_) => format!(
            "the authorization server refused the refresh token ({error}); it was revoked or has expired, so log in again"
        ),
        other => {
            let text = other.to_string();
            if text.starts_with("OAuth") {
                text
            } else {
                format!("OAuth: {text}")
            }
        }
    }
}
