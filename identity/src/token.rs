//! Shared-secret tokens read from a file: the admin token and the node
//! join token. Entry points: [`AdminToken`] and [`JoinToken`], two uses of
//! one [`TokenFile`].
//!
//! - The **admin token** is an admin credential for callers without an
//!   admin certificate, presented as `authorization: Bearer <token>` to SMS
//!   only (`--admin-token-file`). Never sent on by SMS, never accepted by a
//!   node.
//! - The **join token file** (`--join-token-file`) holds, at SMS, the
//!   secret every node's own token derives from (never given to a node;
//!   see `node_token.rs`), and at a node, that node's one-time join token
//!   or its own node token, presented as `spear-join-token: <token>` where
//!   no certificate can speak for it: on a plaintext port (loopback, or
//!   `--insecure`). Without them an anonymous caller on a plaintext port
//!   could heartbeat as a node, watch the registry and take OAuth tokens.
//!
//! Both files are re-read when they change, so rotating a token is writing
//! a new file; the old token stops working within a second. Emptying or
//! deleting the file (or writing one that cannot be a token) revokes it: no
//! token is accepted until the file holds a good one again. Neither is ever
//! given on a command line.

use std::path::PathBuf;

use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::Request;

use crate::reload::Watched;

/// Shorter tokens are refused: a token must not be guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// The metadata key a node's join token travels in.
pub const JOIN_TOKEN_HEADER: &str = "spear-join-token";

/// Which token a file holds, for its sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Admin,
    Join,
    Viewer,
}

impl std::fmt::Display for TokenKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TokenKind::Admin => "admin token",
            TokenKind::Join => "node join token",
            TokenKind::Viewer => "viewer token",
        })
    }
}

/// Why a token file cannot be used. Never carries the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the {kind} file {path}: {cause}")]
    Read {
        kind: TokenKind,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the {kind} file {path} holds {len} characters; write a random token of at least {MIN_TOKEN_LEN} (for example `openssl rand -hex 32`)")]
    TooShort {
        kind: TokenKind,
        path: PathBuf,
        len: usize,
    },
    #[error("the {kind} file {path} holds characters a header cannot carry; use letters, digits and punctuation")]
    NotHeaderSafe { kind: TokenKind, path: PathBuf },
}

/// What a request presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented {
    None,
    Valid,
    Wrong,
}

/// A token file, when one is configured. The watched value is `None`
/// while the file is gone, empty or unusable.
#[derive(Clone)]
pub struct TokenFile {
    kind: TokenKind,
    current: Option<Watched<Option<String>>>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = if self.current.is_some() {
            "<set>"
        } else {
            "<none>"
        };
        write!(f, "TokenFile({}: {set})", self.kind)
    }
}

fn read_token(kind: TokenKind, path: &PathBuf) -> Result<String, TokenError> {
    let text = std::fs::read_to_string(path).map_err(|cause| TokenError::Read {
        kind,
        path: path.clone(),
        cause,
    })?;
    let token = text.trim().to_string();
    if token.len() < MIN_TOKEN_LEN {
        return Err(TokenError::TooShort {
            kind,
            path: path.clone(),
            len: token.len(),
        });
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::NotHeaderSafe {
            kind,
            path: path.clone(),
        });
    }
    Ok(token)
}

impl TokenFile {
    fn none(kind: TokenKind) -> Self {
        Self {
            kind,
            current: None,
        }
    }

    /// The token in `path`, re-read when the file changes. A bad file at
    /// start is an error; later it accepts no token until it is good again.
    /// Must run inside Tokio.
    fn from_file(kind: TokenKind, path: PathBuf) -> Result<Self, TokenError> {
        read_token(kind, &path)?;
        let file = path.clone();
        let watched = Watched::start("token file", vec![path], move || {
            Ok::<_, std::convert::Infallible>(match read_token(kind, &file) {
                Ok(token) => Some(token),
                Err(error) => {
                    tracing::warn!(
                        "{error}; no {kind} is accepted until the file holds a good one"
                    );
                    None
                }
            })
        })
        .unwrap_or_else(|never| match never {});
        Ok(Self {
            kind,
            current: Some(watched),
        })
    }

    fn fixed(kind: TokenKind, token: &str) -> Self {
        Self {
            kind,
            current: Some(Watched::fixed(Some(token.to_string()))),
        }
    }

    fn is_set(&self) -> bool {
        self.current.is_some()
    }

    /// The token now, if the file holds a good one.
    fn current(&self) -> Option<String> {
        self.current.as_ref().and_then(|w| (*w.get()).clone())
    }

    /// What `presented` (the token as sent) amounts to, compared in
    /// constant time. Without a configured file a presented token counts
    /// for nothing.
    fn check(&self, presented: Option<&[u8]>) -> Presented {
        let Some(expected) = &self.current else {
            return Presented::None;
        };
        let Some(presented) = presented else {
            return Presented::None;
        };
        let expected = expected.get();
        match expected.as_deref() {
            Some(expected) if constant_time_eq(presented, expected.as_bytes()) => Presented::Valid,
            // A wrong token, or the file was emptied or removed.
            _ => Presented::Wrong,
        }
    }
}

/// The console's read-only token (SMS's `--viewer-token-file`): it signs
/// in to the console as a viewer, and is accepted nowhere else.
#[derive(Clone, Debug, Default)]
pub struct ViewerToken(Option<TokenFile>);

impl ViewerToken {
    pub fn none() -> Self {
        Self(None)
    }

    /// The token in `path`, re-read when the file changes. Must run inside
    /// Tokio.
    pub fn from_file(path: PathBuf) -> Result<Self, TokenError> {
        TokenFile::from_file(TokenKind::Viewer, path).map(|f| Self(Some(f)))
    }

    /// A token given directly (tests and benchmarks).
    pub fn fixed(token: &str) -> Self {
        Self(Some(TokenFile::fixed(TokenKind::Viewer, token)))
    }

    pub fn is_set(&self) -> bool {
        self.0.as_ref().is_some_and(TokenFile::is_set)
    }

    /// Whether `token` is the viewer token now, compared in constant time.
    pub fn matches(&self, token: &str) -> bool {
        self.0
            .as_ref()
            .is_some_and(|f| f.check(Some(token.as_bytes())) == Presented::Valid)
    }
}

/// The admin token (SMS's `--admin-token-file`).
#[derive(Clone, Debug)]
pub struct AdminToken(TokenFile);

impl Default for AdminToken {
    fn default() -> Self {
        Self::none()
    }
}

impl AdminToken {
    /// No token: admin calls need an admin certificate (or, on a plaintext
    /// loopback SMS, nothing).
    pub fn none() -> Self {
        Self(TokenFile::none(TokenKind::Admin))
    }

    /// The token in `path`, re-read when the file changes. Must run inside
    /// Tokio.
    pub fn from_file(path: PathBuf) -> Result<Self, TokenError> {
        TokenFile::from_file(TokenKind::Admin, path).map(Self)
    }

    /// A token given directly (tests and benchmarks).
    pub fn fixed(token: &str) -> Self {
        Self(TokenFile::fixed(TokenKind::Admin, token))
    }

    pub fn is_set(&self) -> bool {
        self.0.is_set()
    }

    /// What `request` presents. Without a configured token a presented one
    /// counts for nothing, so an operator with `SMS_ADMIN_TOKEN` left in
    /// the environment still gets in with an admin certificate.
    pub fn presented<T>(&self, request: &Request<T>) -> Presented {
        self.presented_in(
            request
                .metadata()
                .get("authorization")
                .map(|v| v.as_encoded_bytes()),
        )
    }

    /// Whether `token` (as typed, not a header) is the admin token now,
    /// compared in constant time: the console's sign-in.
    pub fn matches(&self, token: &str) -> bool {
        self.0.check(Some(token.as_bytes())) == Presented::Valid
    }

    /// What an `authorization` header value presents: [`Self::presented`]
    /// for callers that hold the HTTP request, before its body is read.
    pub fn presented_in(&self, header: Option<&[u8]>) -> Presented {
        match header {
            None => self.0.check(None),
            Some(header) => match header.strip_prefix(b"Bearer ") {
                Some(token) => self.0.check(Some(token)),
                // Not a bearer token at all: wrong, if a token is set.
                None => self.0.check(Some(b"")),
            },
        }
    }
}

/// A `--join-token-file`: at SMS the secret node tokens derive from
/// ([`crate::NodeTokens`]), at a node its join or node token, which it
/// presents.
#[derive(Clone, Debug)]
pub struct JoinToken(TokenFile);

impl Default for JoinToken {
    fn default() -> Self {
        Self::none()
    }
}

impl JoinToken {
    pub fn none() -> Self {
        Self(TokenFile::none(TokenKind::Join))
    }

    /// The token in `path`, re-read when the file changes. Must run inside
    /// Tokio.
    pub fn from_file(path: PathBuf) -> Result<Self, TokenError> {
        TokenFile::from_file(TokenKind::Join, path).map(Self)
    }

    /// A token given directly (tests and benchmarks).
    pub fn fixed(token: &str) -> Self {
        Self(TokenFile::fixed(TokenKind::Join, token))
    }

    pub fn is_set(&self) -> bool {
        self.0.is_set()
    }

    /// The file's token now (SMS's secret, or a node's own or join
    /// token), if it holds a good one. For checking and exchanging it;
    /// never for a log.
    pub fn secret(&self) -> Option<String> {
        self.0.current()
    }

    /// What a `spear-join-token` header value presents.
    pub fn presented_in(&self, header: Option<&[u8]>) -> Presented {
        self.0.check(header)
    }

    /// What `request` presents.
    pub fn presented<T>(&self, request: &Request<T>) -> Presented {
        self.presented_in(
            request
                .metadata()
                .get(JOIN_TOKEN_HEADER)
                .map(|v| v.as_encoded_bytes()),
        )
    }

    /// Adds the token, when the file holds one, to an outgoing request's
    /// metadata (the node's calls to SMS).
    pub fn attach(&self, metadata: &mut MetadataMap) {
        if let Some(token) = self.0.current() {
            if let Ok(mut value) = AsciiMetadataValue::try_from(token) {
                value.set_sensitive(true);
                metadata.insert(JOIN_TOKEN_HEADER, value);
            }
        }
    }
}

/// A tonic interceptor that presents the join token on every call.
impl tonic::service::Interceptor for JoinToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, tonic::Status> {
        self.attach(request.metadata_mut());
        Ok(request)
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
