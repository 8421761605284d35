//! A node's certificate from its join token (docs/security.md, "Node
//! credentials"). Entry point: [`certificate`].
//!
//! Started with `--tls-ca` and `--join-token-file` but no certificate of
//! its own, the node makes a key in its state dir (`tls/node.key`, 0600;
//! it never leaves the node), sends SMS a certificate request with its
//! join token over TLS that checks SMS's certificate (`Nodes.Join`), and
//! keeps the certificate SMS's CA signs (`tls/node.pem`), for
//! `spiffe://<domain>/node/<id>` only. From then on it speaks mutual TLS
//! with it, across restarts; the spent join token is not read again.

use std::path::{Path, PathBuf};

use spear_identity::{JoinToken, TlsFiles, TlsIdentity};

use super::credential::{join, write_private, CredentialError, Joined};

/// Where the joined certificate and key are kept, in the state dir.
const TLS_DIR: &str = "tls";

/// Why the node has no certificate.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("joining for a certificate needs the node's id: pass --node-id (the id the join token was made for)")]
    NoNodeId,
    #[error("cannot make the node's key or certificate request: {0}")]
    Key(#[from] rcgen::Error),
    #[error("SMS answered the join without a certificate; give SMS --ca-dir, or issue the node's with `sms certs issue DIR --node ID`")]
    NoCertificate,
    #[error(transparent)]
    Credential(#[from] CredentialError),
    #[error(transparent)]
    Tls(#[from] spear_identity::TlsError),
    #[error(transparent)]
    Token(#[from] spear_identity::TokenError),
    #[error("the certificate this node was given when it joined ({path}) expired at {at}; make a new join token (`sms nodes join-token ID`), put it in --join-token-file, remove {path} and start the node again: it joins anew")]
    JoinedExpired { path: PathBuf, at: String },
}

/// The node's TLS identity: the certificate kept from an earlier join, or
/// the one a join with the token in `join_file` gives now.
pub async fn certificate(
    ca: PathBuf,
    join_file: PathBuf,
    state_dir: &Path,
    node_id: Option<&str>,
    sms: &[String],
) -> Result<TlsIdentity, BootstrapError> {
    let dir = state_dir.join(TLS_DIR);
    let files = TlsFiles {
        ca: ca.clone(),
        cert: dir.join("node.pem"),
        key: dir.join("node.key"),
    };
    if files.cert.exists() && files.key.exists() {
        // A joined certificate is renewed by joining again, not by `sms
        // certs issue`: say so rather than the general sentence.
        return TlsIdentity::load(files).map_err(|error| match error {
            spear_identity::TlsError::Expired { path, at } => {
                BootstrapError::JoinedExpired { path, at }
            }
            other => other.into(),
        });
    }
    let node_id = node_id.ok_or(BootstrapError::NoNodeId)?;
    let token = JoinToken::from_file(join_file)?
        .secret()
        .unwrap_or_default();
    let key = rcgen::KeyPair::generate()?;
    let csr = rcgen::CertificateParams::new(Vec::<String>::new())?
        .serialize_request(&key)?
        .pem()?;
    let trust = TlsIdentity::trust_only(ca)?;
    let Joined::Certificate(pem) = join(sms, Some(trust), node_id, token, csr).await? else {
        return Err(BootstrapError::NoCertificate);
    };
    std::fs::create_dir_all(&dir).map_err(|cause| CredentialError::Write {
        path: dir.clone(),
        cause,
    })?;
    // Key first: a certificate is never on disk without its key.
    write_private(&files.key, &key.serialize_pem())?;
    write_private(&files.cert, &pem)?;
    tracing::info!(node_id, path = %files.cert.display(), "joined SMS: kept the node's certificate from SMS's CA");
    Ok(TlsIdentity::load(files)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept certificate past its validity is refused with the fix that
    /// applies to a joined node (a new join token), before any network.
    #[tokio::test]
    async fn an_expired_joined_certificate_says_to_join_again() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join(TLS_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::URI(
            "spiffe://test.example/node/n1".try_into().unwrap(),
        )];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(400);
        params.not_after = now - time::Duration::days(35);
        let cert = params.self_signed(&key).unwrap();
        let ca = state.path().join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        std::fs::write(dir.join("node.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("node.key"), key.serialize_pem()).unwrap();
        let join = state.path().join("join");
        let error = certificate(ca, join, state.path(), Some("n1"), &[])
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("tls/node.pem) expired at"), "{error}");
        assert!(error.contains("sms nodes join-token"), "{error}");
        assert!(!error.contains("sms certs issue"), "{error}");
    }
}
