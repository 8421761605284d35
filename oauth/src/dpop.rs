//! DPoP (RFC 9449, SEP-1932): tokens bound to a key this client holds, so a
//! stolen token is useless without the key. Entry points: [`DpopKey`],
//! whose [`DpopKey::proof`] signs one request, and [`DpopHttpClient`], the
//! OAuth client that proves possession at the token endpoint.
//!
//! A proof is a fresh ES256 JWT (`typ: dpop+jwt`, the public key in its
//! header) naming the request's method and URL (no query or fragment), the
//! time, a unique `jti`, the access token's hash (`ath`) at a resource
//! server, and the server's nonce once it asked for one.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientFuture, OAuthHttpRedirectPolicy, OAuthHttpRequest,
};
use sha2::Digest;

use crate::network::{read_bounded, Network};
use crate::OAuthError;

/// The proof header.
pub const DPOP_HEADER: &str = "dpop";
/// Where a server hands out the nonce proofs must carry.
pub const NONCE_HEADER: &str = "dpop-nonce";

/// A P-256 key made for one client, held in memory only.
pub struct DpopKey {
    signing: EncodingKey,
    jwk: jsonwebtoken::jwk::Jwk,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DpopKey")
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl DpopKey {
    pub fn generate() -> Result<DpopKey, OAuthError> {
        let failed = |e: &dyn std::fmt::Display| OAuthError::Flow(format!("no DPoP key: {e}"));
        let pair =
            rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| failed(&e))?;
        let point = pair.public_key_raw();
        if point.len() != 65 {
            return Err(failed(&"the public key is not an uncompressed P-256 point"));
        }
        let jwk = serde_json::from_value(serde_json::json!({
            "kty": "EC", "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        }))
        .map_err(|e| failed(&e))?;
        Ok(DpopKey {
            signing: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk,
        })
    }

    /// A fresh proof for `method` on `url`; `access_token` at a resource
    /// server (its hash goes in), `nonce` when the server asked for one.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, OAuthError> {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("dpop+jwt".into());
        header.jwk = Some(self.jwk.clone());
        let iat = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut claims = serde_json::json!({
            "jti": b64(&rand::random::<[u8; 16]>()),
            "htm": method,
            "htu": target(url),
            "iat": iat,
        });
        if let Some(token) = access_token {
            claims["ath"] = serde_json::json!(b64(&sha2::Sha256::digest(token.as_bytes())));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = serde_json::json!(nonce);
        }
        jsonwebtoken::encode(&header, &claims, &self.signing)
            .map_err(|e| OAuthError::Flow(format!("signing a DPoP proof failed: {e}")))
    }
}

/// `url` as a proof names it: without query or fragment (RFC 9449 §4.2).
pub fn target(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or(url).to_string(),
    }
}

/// What the client learned from the authorization server's answers.
#[derive(Default)]
struct Learned {
    /// Token endpoints whose metadata says they take DPoP proofs.
    token_endpoints: HashSet<String>,
    nonce: Option<String>,
}

/// The OAuth state machine's HTTP client with DPoP: a token request to an
/// authorization server whose metadata lists
/// `dpop_signing_alg_values_supported` carries a proof (and is sent once
/// more with the nonce the server asks for, `use_dpop_nonce`); everything
/// else goes out as it is.
pub struct DpopHttpClient {
    key: Arc<DpopKey>,
    /// Where its requests may go.
    network: Network,
    learned: Mutex<Learned>,
}

impl DpopHttpClient {
    pub fn new(key: Arc<DpopKey>, network: Network) -> DpopHttpClient {
        DpopHttpClient {
            key,
            network,
            learned: Mutex::new(Learned::default()),
        }
    }

    /// Whether `request` is a token request the server takes proofs for.
    fn proves(&self, request: &http::Request<Vec<u8>>) -> Option<String> {
        let url = target(&request.uri().to_string());
        (request.method() == http::Method::POST
            && self.learned.lock().token_endpoints.contains(&url))
        .then_some(url)
    }

    /// Remembers what `response` says: a nonce, a DPoP-capable endpoint.
    fn learn(&self, response: &http::Response<Vec<u8>>) {
        let mut learned = self.learned.lock();
        if let Some(nonce) = response
            .headers()
            .get(NONCE_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            learned.nonce = Some(nonce.to_string());
        }
        let Ok(metadata) = serde_json::from_slice::<serde_json::Value>(response.body()) else {
            return;
        };
        let takes_es256 = metadata["dpop_signing_alg_values_supported"]
            .as_array()
            .is_some_and(|algs| algs.iter().any(|a| a == "ES256"));
        if let (true, Some(endpoint)) = (takes_es256, metadata["token_endpoint"].as_str()) {
            learned.token_endpoints.insert(target(endpoint));
        }
    }

    async fn send(
        &self,
        request: &http::Request<Vec<u8>>,
        redirects: OAuthHttpRedirectPolicy,
        proof: Option<String>,
    ) -> Result<http::Response<Vec<u8>>, Box<dyn std::error::Error + Send + Sync>> {
        let mut copy = http::Request::builder()
            .method(request.method().clone())
            .uri(request.uri().clone())
            .version(request.version());
        for (name, value) in request.headers() {
            copy = copy.header(name, value);
        }
        let mut outgoing = reqwest::Request::try_from(copy.body(request.body().clone())?)?;
        if let Some(proof) = proof {
            outgoing
                .headers_mut()
                .insert(DPOP_HEADER, http::HeaderValue::from_str(&proof)?);
        }
        let follow = !matches!(redirects, OAuthHttpRedirectPolicy::Stop);
        let response = self.network.send(outgoing, follow).await?;
        let mut answer = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        Ok(answer.body(read_bounded(response).await?)?)
    }

    async fn execute_request(
        &self,
        request: OAuthHttpRequest,
    ) -> Result<http::Response<Vec<u8>>, Box<dyn std::error::Error + Send + Sync>> {
        let redirects = request.redirect_policy;
        let request = request.request;
        let Some(url) = self.proves(&request) else {
            let response = self.send(&request, redirects, None).await?;
            self.learn(&response);
            return Ok(response);
        };
        let nonce = self.learned.lock().nonce.clone();
        let proof = self.key.proof("POST", &url, None, nonce.as_deref())?;
        let response = self.send(&request, redirects, Some(proof)).await?;
        self.learn(&response);
        let asked = response.status() == http::StatusCode::BAD_REQUEST
            && serde_json::from_slice::<serde_json::Value>(response.body())
                .is_ok_and(|body| body["error"] == "use_dpop_nonce");
        let fresh = self.learned.lock().nonce.clone();
        if !asked || fresh.is_none() || fresh == nonce {
            return Ok(response);
        }
        // Once more, with the nonce the server asked for (RFC 9449 §8).
        let proof = self.key.proof("POST", &url, None, fresh.as_deref())?;
        let response = self.send(&request, redirects, Some(proof)).await?;
        self.learn(&response);
        Ok(response)
    }
}

impl OAuthHttpClient for DpopHttpClient {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(self.execute_request(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_names_the_request_and_is_fresh_each_time() {
        let key = DpopKey::generate().unwrap();
        let a = key
            .proof(
                "POST",
                "https://rs.example/mcp?x=1#f",
                Some("tok"),
                Some("n1"),
            )
            .unwrap();
        let b = key
            .proof("POST", "https://rs.example/mcp", Some("tok"), Some("n1"))
            .unwrap();
        let header = jsonwebtoken::decode_header(&a).unwrap();
        assert_eq!(header.typ.as_deref(), Some("dpop+jwt"));
        let jwk = header.jwk.unwrap();
        // The public half only.
        let shown = serde_json::to_value(&jwk).unwrap();
        assert!(shown.get("d").is_none(), "{shown}");
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
        let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let claims = |t: &str| {
            jsonwebtoken::decode::<serde_json::Value>(t, &decoding, &validation)
                .unwrap()
                .claims
        };
        let (ca, cb) = (claims(&a), claims(&b));
        assert_eq!(ca["htu"], "https://rs.example/mcp");
        assert_eq!(ca["htm"], "POST");
        assert_eq!(ca["nonce"], "n1");
        assert_eq!(ca["ath"], b64(&sha2::Sha256::digest(b"tok")));
        assert_ne!(ca["jti"], cb["jti"]);
    }
}
