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
        return Ok(TlsIdentity::load(files)?);
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
