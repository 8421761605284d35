//! People and workloads signed in at an OpenID Connect issuer: SMS checks
//! the ID or access token a caller presents and makes it a
//! [`Principal`]. Entry point: [`OidcVerifier::verify`].
//!
//! The issuer's keys come from its discovery document's `jwks_uri`
//! (OpenID Connect Discovery 1.0, whose `issuer` must be the one
//! configured) and are cached. A token signed with a key the cache does not
//! hold makes one new fetch (the issuer rotated its keys), at most every
//! [`REFETCH_EVERY`], so tokens with made-up key ids cannot make SMS hammer
//! the issuer; one fetch runs at a time, and tokens signed with a key
//! already held never wait for it. Only asymmetric algorithms are accepted: `none` and the
//! HMAC ones (a key the client could know) are refused.
//!
//! Checked, in this order, so the sentence names the first thing wrong:
//! the token's shape, its issuer, its key, its signature, its expiry (with
//! [`LEEWAY`]), its audience, its subject.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use spear_proto::v1::Principal;
use tokio::sync::Mutex;

/// Clock skew allowed on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);
/// The least time between two fetches of the issuer's keys.
pub const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// How long the issuer has to answer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The most a token may weigh. ID tokens are a few KiB, but one that
/// lists a person's groups from a large directory passes 20 KiB; the
/// header bound of every port ([`crate::incoming::MAX_HEADER_BYTES`])
/// leaves room for this and the rest of a request's headers.
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// The issuer SMS trusts (`sms serve --oidc-issuer`, `--oidc-audience`).
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// Exactly as the issuer's tokens spell it.
    pub issuer: String,
    /// What the tokens must be for: the client id of ID tokens, or the
    /// resource of access tokens.
    pub audience: String,
    /// The claim listing a subject's groups.
    pub groups_claim: String,
}

/// Why a presented token is refused, in a sentence the caller can act on.
/// None of them repeats the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefused {
    #[error("the token is not a signed JWT SMS can read ({0})")]
    Malformed(&'static str),
    #[error("the token was issued by '{found}', which SMS does not trust (it trusts '{trusted}'); sign in there")]
    ForeignIssuer { found: String, trusted: String },
    #[error("the token is signed with {0:?}; SMS takes only asymmetric signatures (RS*, PS*, ES*, EdDSA)")]
    Algorithm(Algorithm),
    #[error("the token is signed with a key its issuer does not publish")]
    UnknownKey,
    #[error("the token's signature does not verify against its issuer's keys")]
    Signature,
    #[error("the token has expired; sign in again")]
    Expired,
    #[error("the token is not valid yet (its nbf is in the future)")]
    NotYetValid,
    #[error("the token is not for this installation: its audience is not '{0}'")]
    Audience(String),
    #[error("the token names no subject (sub)")]
    NoSubject,
    #[error("the ID token was not made for this sign-in (its nonce differs); sign in again")]
    Nonce,
    #[error("SMS could not fetch its issuer's keys: {0}")]
    Unreachable(String),
}

#[derive(serde::Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
    #[serde(default)]
    authorization_endpoint: Option<String>,
    #[serde(default)]
    token_endpoint: Option<String>,
}

/// Where people sign in at the issuer (its discovery document's).
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub authorization: String,
    pub token: String,
}

/// Verifies tokens of one issuer; cheap to share behind an `Arc`.
pub struct OidcVerifier {
    config: OidcConfig,
    http: reqwest::Client,
    /// The issuer's keys as last fetched: read without waiting.
    keys: parking_lot::RwLock<Arc<JwkSet>>,
    /// When they were last fetched, and why that failed if it did; held
    /// while a fetch runs, so there is one at a time.
    fetched: Mutex<Option<(Instant, Option<TokenRefused>)>>,
    refetch_every: Duration,
    /// The sign-in endpoints, once the discovery document gave them.
    endpoints: tokio::sync::OnceCell<Endpoints>,
}

impl OidcVerifier {
    pub fn new(config: OidcConfig) -> Result<OidcVerifier, TokenRefused> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TokenRefused::Unreachable(e.to_string()))?;
        Ok(OidcVerifier {
            config,
            http,
            keys: parking_lot::RwLock::new(Arc::new(JwkSet { keys: Vec::new() })),
            fetched: Mutex::new(None),
            refetch_every: REFETCH_EVERY,
            endpoints: tokio::sync::OnceCell::new(),
        })
    }

    /// The issuer, as its tokens spell it.
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// What the issuer's tokens must be for: also the client id people
    /// sign in to the console with.
    pub fn audience(&self) -> &str {
        &self.config.audience
    }

    /// The issuer's sign-in endpoints, from its discovery document (kept
    /// once read).
    pub async fn endpoints(&self) -> Result<Endpoints, TokenRefused> {
        self.endpoints
            .get_or_try_init(|| async {
                let discovery = self.discovery().await?;
                match (discovery.authorization_endpoint, discovery.token_endpoint) {
                    (Some(authorization), Some(token)) => Ok(Endpoints {
                        authorization,
                        token,
                    }),
                    _ => Err(TokenRefused::Unreachable(
                        "its discovery document names no authorization or token endpoint".into(),
                    )),
                }
            })
            .await
            .cloned()
    }

    /// The principal of an ID token a sign-in obtained, checked as
    /// [`OidcVerifier::verify`] checks any token and carrying `nonce`
    /// (it was made for this sign-in), and when it expires (Unix seconds).
    pub async fn verify_signed_in(
        &self,
        token: &str,
        nonce: &str,
    ) -> Result<(Principal, u64), TokenRefused> {
        let (principal, claims) = self.verify_claims(token).await?;
        if claims.get("nonce").and_then(|n| n.as_str()) != Some(nonce) {
            return Err(TokenRefused::Nonce);
        }
        let expires = claims.get("exp").and_then(|e| e.as_u64()).unwrap_or(0);
        Ok((principal, expires))
    }

    /// The principal `token` speaks for, or why it does not.
    pub async fn verify(&self, token: &str) -> Result<Principal, TokenRefused> {
        Ok(self.verify_claims(token).await?.0)
    }

    /// The principal and the verified claims of `token`.
    async fn verify_claims(
        &self,
        token: &str,
    ) -> Result<(Principal, serde_json::Value), TokenRefused> {
        let token = token.trim();
        let claims = unverified_claims(token)?;
        let issuer = claims.get("iss").and_then(|v| v.as_str()).unwrap_or("");
        if issuer != self.config.issuer {
            return Err(TokenRefused::ForeignIssuer {
                found: issuer.chars().take(256).collect(),
                trusted: self.config.issuer.clone(),
            });
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| TokenRefused::Malformed("its header is not JSON"))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(TokenRefused::Algorithm(header.alg));
        }
        let key = self.key(header.kid.as_deref()).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &key, &validation)
            .map_err(|e| self.refusal(e))?;
        let subject = data
            .claims
            .get("sub")
            .and_then(|s| s.as_str())
            .unwrap_or("");
        if subject.is_empty() {
            return Err(TokenRefused::NoSubject);
        }
        let groups = data
            .claims
            .get(&self.config.groups_claim)
            .and_then(|g| g.as_array())
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(|g| g.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let principal = Principal::person(&self.config.issuer, subject, groups);
        Ok((principal, data.claims))
    }

    fn refusal(&self, error: jsonwebtoken::errors::Error) -> TokenRefused {
        use jsonwebtoken::errors::ErrorKind;
        match error.kind() {
            ErrorKind::ExpiredSignature => TokenRefused::Expired,
            ErrorKind::ImmatureSignature => TokenRefused::NotYetValid,
            ErrorKind::InvalidAudience => TokenRefused::Audience(self.config.audience.clone()),
            ErrorKind::MissingRequiredClaim(claim) if claim == "sub" => TokenRefused::NoSubject,
            ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => {
                TokenRefused::Audience(self.config.audience.clone())
            }
            ErrorKind::MissingRequiredClaim(_) => {
                TokenRefused::Malformed("a required claim is missing")
            }
            _ => TokenRefused::Signature,
        }
    }

    /// The issuer's key `kid` (the only key, when the token names none),
    /// fetching the key set when the cache lacks it and may be refreshed.
    async fn key(&self, kid: Option<&str>) -> Result<DecodingKey, TokenRefused> {
        let held = Arc::clone(&self.keys.read());
        if let Some(key) = find(&held, kid) {
            return key;
        }
        let mut fetched = self.fetched.lock().await;
        // Another request may have fetched them while this one waited.
        let held = Arc::clone(&self.keys.read());
        if let Some(key) = find(&held, kid) {
            return key;
        }
        if let Some((at, failed)) = fetched.as_ref() {
            if at.elapsed() < self.refetch_every {
                return Err(failed.clone().unwrap_or(TokenRefused::UnknownKey));
            }
        }
        // Counted as a fetch even when it fails: an issuer that is down is
        // asked again after the interval, not on every token, and each
        // token meanwhile is told why.
        let set = match self.fetch_keys().await {
            Ok(set) => {
                *fetched = Some((Instant::now(), None));
                Arc::new(set)
            }
            Err(failed) => {
                *fetched = Some((Instant::now(), Some(failed.clone())));
                return Err(failed);
            }
        };
        tracing::info!(issuer = %self.config.issuer, keys = set.keys.len(), "OpenID issuer keys fetched");
        *self.keys.write() = Arc::clone(&set);
        find(&set, kid).unwrap_or(Err(TokenRefused::UnknownKey))
    }

    async fn fetch_keys(&self) -> Result<JwkSet, TokenRefused> {
        let discovery = self.discovery().await?;
        self.get_json(&discovery.jwks_uri).await
    }

    async fn discovery(&self) -> Result<Discovery, TokenRefused> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let discovery: Discovery = self.get_json(&url).await?;
        if discovery.issuer != self.config.issuer {
            return Err(TokenRefused::Unreachable(format!(
                "its discovery document names issuer '{}', not '{}'",
                discovery.issuer.chars().take(256).collect::<String>(),
                self.config.issuer
            )));
        }
        Ok(discovery)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, TokenRefused> {
        let unreachable =
            |e: reqwest::Error| TokenRefused::Unreachable(e.without_url().to_string());
        let body = self
            .http
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(unreachable)?
            .bytes()
            .await
            .map_err(unreachable)?;
        serde_json::from_slice(&body).map_err(|e| {
            TokenRefused::Unreachable(format!(
                "{url} did not answer JSON of the expected shape: {e}"
            ))
        })
    }
}

/// The key for `kid` in `set`, if it is there (an unusable key is an error).
fn find(set: &JwkSet, kid: Option<&str>) -> Option<Result<DecodingKey, TokenRefused>> {
    let jwk = match kid {
        Some(kid) => set.find(kid)?,
        None if set.keys.len() == 1 => &set.keys[0],
        None => return None,
    };
    Some(DecodingKey::from_jwk(jwk).map_err(|_| TokenRefused::UnknownKey))
}

/// The claims of `token` before its signature is checked: only to say
/// which issuer it claims, so a foreign token is named as such.
fn unverified_claims(token: &str) -> Result<serde_json::Value, TokenRefused> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(TokenRefused::Malformed("it is over 64 KiB"));
    }
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenRefused::Malformed(
            "it is not three dot-separated parts",
        ));
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| TokenRefused::Malformed("its payload is not base64url"))?;
    serde_json::from_slice(&bytes).map_err(|_| TokenRefused::Malformed("its payload is not JSON"))
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;
