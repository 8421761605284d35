//! The admin bearer token: an admin credential for callers without an
//! admin certificate, presented as `authorization: Bearer <token>` to SMS
//! only. SMS reads it from `--admin-token-file` and re-reads the file when
//! it changes, so rotating it is writing a new file; the old token stops
//! working within a second. Emptying or deleting the file (or writing one
//! that cannot be a token) revokes it: no token is accepted until the file
//! holds a good one again. Never given on a command line, never sent on by
//! SMS, never accepted by a node.

use std::path::PathBuf;

use tonic::Request;

use crate::reload::Watched;

/// Shorter tokens are refused: a token must not be guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why a token file cannot be used. Never carries the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the admin token file {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the admin token file {path} holds {len} characters; write a random token of at least {MIN_TOKEN_LEN} (for example `openssl rand -hex 32`)")]
    TooShort { path: PathBuf, len: usize },
    #[error("the admin token file {path} holds characters a header cannot carry; use letters, digits and punctuation")]
    NotHeaderSafe { path: PathBuf },
}

/// What a request presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented {
    None,
    Valid,
    Wrong,
}

/// The admin token, when one is configured. The watched value is `None`
/// while the file is gone, empty or unusable.
#[derive(Clone, Default)]
pub struct AdminToken(Option<Watched<Option<String>>>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "AdminToken(<set>)"
        } else {
            "AdminToken(<none>)"
        })
    }
}

fn read_token(path: &PathBuf) -> Result<String, TokenError> {
    let text = std::fs::read_to_string(path).map_err(|cause| TokenError::Read {
        path: path.clone(),
        cause,
    })?;
    let token = text.trim().to_string();
    if token.len() < MIN_TOKEN_LEN {
        return Err(TokenError::TooShort {
            path: path.clone(),
            len: token.len(),
        });
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::NotHeaderSafe { path: path.clone() });
    }
    Ok(token)
}

impl AdminToken {
    /// No token: admin calls need an admin certificate (or, on a plaintext
    /// loopback SMS, nothing).
    pub fn none() -> Self {
        Self(None)
    }

    /// The token in `path`, re-read when the file changes. Must run inside
    /// Tokio.
    pub fn from_file(path: PathBuf) -> Result<Self, TokenError> {
        // A bad file at start is a start-up error; later it revokes.
        read_token(&path)?;
        let file = path.clone();
        let watched = Watched::start("admin token file", vec![path], move || {
            Ok::<_, std::convert::Infallible>(match read_token(&file) {
                Ok(token) => Some(token),
                Err(error) => {
                    tracing::warn!(
                        "{error}; no admin token is accepted until the file holds a good one"
                    );
                    None
                }
            })
        })
        .unwrap_or_else(|never| match never {});
        Ok(Self(Some(watched)))
    }

    /// A token given directly (tests and benchmarks).
    pub fn fixed(token: &str) -> Self {
        Self(Some(Watched::fixed(Some(token.to_string()))))
    }

    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// What `request` presents, compared in constant time. Without a
    /// configured token a presented one counts for nothing, so an operator
    /// with `SMS_ADMIN_TOKEN` left in the environment still gets in with an
    /// admin certificate.
    pub fn presented<T>(&self, request: &Request<T>) -> Presented {
        self.presented_in(
            request
                .metadata()
                .get("authorization")
                .map(|v| v.as_encoded_bytes()),
        )
    }

    /// What an `authorization` header value presents: [`Self::presented`]
    /// for callers that hold the HTTP request, before its body is read.
    pub fn presented_in(&self, header: Option<&[u8]>) -> Presented {
        let Some(expected) = &self.0 else {
            return Presented::None;
        };
        let Some(header) = header else {
            return Presented::None;
        };
        let expected = expected.get();
        let Some(expected) = expected.as_deref() else {
            // The file was emptied or removed: every token is wrong.
            return Presented::Wrong;
        };
        match header.strip_prefix(b"Bearer ") {
            Some(token) if constant_time_eq(token, expected.as_bytes()) => Presented::Valid,
            _ => Presented::Wrong,
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(v) = value {
            r.metadata_mut().insert("authorization", v.parse().unwrap());
        }
        r
    }

    #[test]
    fn only_the_exact_bearer_token_is_valid() {
        let token = AdminToken::fixed("s3cret-s3cret-s3cret");
        assert_eq!(token.presented(&with_auth(None)), Presented::None);
        assert_eq!(
            token.presented(&with_auth(Some("Bearer nope"))),
            Presented::Wrong
        );
        assert_eq!(
            token.presented(&with_auth(Some("s3cret-s3cret-s3cret"))),
            Presented::Wrong
        );
        assert_eq!(
            token.presented(&with_auth(Some("Bearer s3cret-s3cret-s3cret"))),
            Presented::Valid
        );
        assert_eq!(
            AdminToken::none().presented(&with_auth(Some("Bearer x"))),
            Presented::None
        );
    }

    #[tokio::test]
    async fn a_short_token_file_is_refused_without_showing_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "short\n").unwrap();
        let error = AdminToken::from_file(path).unwrap_err().to_string();
        assert!(error.contains("at least 16"), "{error}");
        assert!(
            !error.contains("short\n") && !error.contains(": short"),
            "{error}"
        );
    }

    /// Polls (in paused time) until `token` presents `want` for `header`.
    async fn until(token: &AdminToken, header: &str, want: Presented) -> bool {
        for _ in 0..10 {
            if token.presented_in(Some(header.as_bytes())) == want {
                return true;
            }
            tokio::time::sleep(crate::reload::RELOAD_EVERY).await;
        }
        false
    }

    #[tokio::test(start_paused = true)]
    async fn an_emptied_or_deleted_token_file_accepts_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let old = "Bearer 0123456789abcdef0123";
        std::fs::write(&path, "0123456789abcdef0123\n").unwrap();
        let token = AdminToken::from_file(path.clone()).unwrap();
        assert_eq!(token.presented_in(Some(old.as_bytes())), Presented::Valid);

        std::fs::write(&path, "").unwrap();
        assert!(
            until(&token, old, Presented::Wrong).await,
            "an emptied file revokes"
        );

        std::fs::write(&path, "fedcba9876543210fedcba\n").unwrap();
        assert!(until(&token, "Bearer fedcba9876543210fedcba", Presented::Valid).await);
        assert_eq!(token.presented_in(Some(old.as_bytes())), Presented::Wrong);

        std::fs::remove_file(&path).unwrap();
        assert!(
            until(&token, "Bearer fedcba9876543210fedcba", Presented::Wrong).await,
            "a deleted file revokes"
        );
    }
}
