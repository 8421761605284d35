//! SMS as the issuer of its nodes' workload identity: a short-lived JWT in
//! the shape of a SPIFFE JWT-SVID (`sub` = `spiffe://<domain>/node/<id>`,
//! one audience, minutes long), signed with SMS's workload key (ES256).
//! Authorization servers trust it the way they trust any OpenID issuer:
//! from the discovery document and keys the console serves at
//! `/.well-known/openid-configuration` and `/.well-known/jwks.json`.
//! Entry point: [`WorkloadIssuer`].
//!
//! A node never holds one: SMS mints it for the one request it makes for
//! the node (the actor of a token exchange, or the assertion of a JWT
//! bearer grant), addressed to that authorization server alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use sha2::Digest;

/// How long a workload JWT lives: one token request.
const LIFETIME: Duration = Duration::from_secs(300);

/// Why the workload key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("cannot read the workload key file {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the workload key file {0} is not a P-256 private key in PEM (make one with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out FILE`)")]
    Malformed(PathBuf),
    #[error("no workload key could be made: {0}")]
    Generate(String),
    #[error("signing a workload JWT failed: {0}")]
    Sign(String),
}

/// Signs nodes' workload JWTs and publishes the keys that verify them.
pub struct WorkloadIssuer {
    signing: EncodingKey,
    /// The public key as a JWK, with its `kid`.
    jwk: serde_json::Value,
    kid: String,
    issuer: String,
    trust_domain: String,
}

impl std::fmt::Debug for WorkloadIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadIssuer")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl WorkloadIssuer {
    /// The key in `path` (`--workload-key-file`), which every replica
    /// shares; `issuer` is the URL the console serves its keys under.
    pub fn from_file(
        path: &Path,
        issuer: String,
        trust_domain: String,
    ) -> Result<WorkloadIssuer, WorkloadError> {
        let pem = std::fs::read_to_string(path).map_err(|cause| WorkloadError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        let pair = rcgen::KeyPair::from_pem(&pem)
            .ok()
            .filter(|pair| pair.algorithm() == &rcgen::PKCS_ECDSA_P256_SHA256)
            .ok_or_else(|| WorkloadError::Malformed(path.to_path_buf()))?;
        WorkloadIssuer::from_pair(&pair, issuer, trust_domain)
            .ok_or_else(|| WorkloadError::Malformed(path.to_path_buf()))
    }

    /// A key that lives as long as this process (one SMS without
    /// `--workload-key-file`): authorization servers fetch the new one
    /// after a restart, as they do after any key rotation.
    pub fn ephemeral(
        issuer: String,
        trust_domain: String,
    ) -> Result<WorkloadIssuer, WorkloadError> {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| WorkloadError::Generate(e.to_string()))?;
        WorkloadIssuer::from_pair(&pair, issuer, trust_domain)
            .ok_or_else(|| WorkloadError::Generate("the key is not P-256".into()))
    }

    fn from_pair(
        pair: &rcgen::KeyPair,
        issuer: String,
        trust_domain: String,
    ) -> Option<WorkloadIssuer> {
        let point = pair.public_key_raw();
        if point.len() != 65 {
            return None;
        }
        let (x, y) = (b64(&point[1..33]), b64(&point[33..65]));
        // RFC 7638: the thumbprint of the required members, in order.
        let thumbprint = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let kid = b64(&sha2::Sha256::digest(thumbprint.as_bytes()));
        let jwk = serde_json::json!({
            "kty": "EC", "crv": "P-256", "x": x, "y": y,
            "kid": kid, "alg": "ES256", "use": "sig",
        });
        Some(WorkloadIssuer {
            signing: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk,
            kid,
            issuer: issuer.trim_end_matches('/').to_string(),
            trust_domain,
        })
    }

    /// The issuer URL its JWTs name.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The SPIFFE id of node `node_id`.
    pub fn node_id(&self, node_id: &str) -> String {
        format!("spiffe://{}/node/{node_id}", self.trust_domain)
    }

    /// A workload JWT for node `node_id`, for `audience` alone.
    pub fn node_jwt(&self, node_id: &str, audience: &str) -> Result<String, WorkloadError> {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("JWT".into());
        header.kid = Some(self.kid.clone());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claims = serde_json::json!({
            "iss": self.issuer,
            "sub": self.node_id(node_id),
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME.as_secs(),
            "jti": b64(&rand::random::<[u8; 16]>()),
        });
        jsonwebtoken::encode(&header, &claims, &self.signing)
            .map_err(|e| WorkloadError::Sign(e.to_string()))
    }

    /// The keys that verify its JWTs (RFC 7517).
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({ "keys": [self.jwk] })
    }

    /// Its OpenID discovery document: what an authorization server needs
    /// to trust it as an issuer.
    pub fn discovery(&self) -> serde_json::Value {
        serde_json::json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/.well-known/jwks.json", self.issuer),
            "id_token_signing_alg_values_supported": ["ES256"],
            "subject_types_supported": ["public"],
            "response_types_supported": ["id_token"],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    #[test]
    fn a_node_jwt_verifies_with_the_published_key_and_names_the_node() {
        let issuer =
            WorkloadIssuer::ephemeral("https://sms.example/".into(), "spear.test".into()).unwrap();
        let jwt = issuer.node_jwt("node-a", "https://as.example").unwrap();
        let jwk: jsonwebtoken::jwk::Jwk =
            serde_json::from_value(issuer.jwks()["keys"][0].clone()).unwrap();
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(&["https://as.example"]);
        validation.set_issuer(&["https://sms.example"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(
            &jwt,
            &DecodingKey::from_jwk(&jwk).unwrap(),
            &validation,
        )
        .unwrap()
        .claims;
        assert_eq!(claims["sub"], "spiffe://spear.test/node/node-a");
        assert!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap() <= 300);
        // Another audience does not take it.
        validation.set_audience(&["https://other.example"]);
        assert!(jsonwebtoken::decode::<serde_json::Value>(
            &jwt,
            &DecodingKey::from_jwk(&jwk).unwrap(),
            &validation
        )
        .is_err());
    }

    #[test]
    fn a_key_file_that_is_not_p256_is_refused_with_the_command_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("workload.pem");
        std::fs::write(&path, "not a key").unwrap();
        let error = WorkloadIssuer::from_file(&path, "https://sms".into(), "d".into()).unwrap_err();
        assert!(error.to_string().contains("openssl genpkey"), "{error}");
    }
}
