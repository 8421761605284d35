//! TLS material on disk: the CA bundle that says whom to trust, and this
//! process's certificate chain and key, whose URI SAN says who it is.
//! [`TlsFiles::load`] reads and checks all three together, so a
//! half-replaced set (a new certificate with the old key) is refused as a
//! whole and the last good set stays in use.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;

use crate::spiffe::{parse_uri, Identity, IdentityError, TrustDomain};

/// Where a process's TLS material lives (`--tls-ca`, `--tls-cert`,
/// `--tls-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM bundle of the CA certificates peers must chain to.
    pub ca: PathBuf,
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why TLS material was refused. Never carries key bytes.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {cause}")]
    Read {
        what: &'static str,
        path: PathBuf,
        cause: String,
    },
    #[error("{what} {path} holds no PEM {expected}")]
    Empty {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
    },
    #[error("certificate {path} does not carry exactly one spiffe:// URI SAN; issue it with `sms certs issue` or give it one")]
    NoIdentity { path: PathBuf },
    #[error("certificate {path}: {cause}")]
    BadIdentity { path: PathBuf, cause: IdentityError },
    #[error("certificate {path} cannot be parsed: {cause}")]
    Parse { path: PathBuf, cause: String },
    #[error("the key {key} does not match the certificate {cert}, or TLS refused them: {cause}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        cause: String,
    },
    #[error("CA bundle {path}: {cause}")]
    Ca { path: PathBuf, cause: String },
    #[error("certificate {path} expired at {at}; issue a new one (`sms certs issue`) and put it in place (it is read again without a restart)")]
    Expired { path: PathBuf, at: String },
    #[error("certificate {path} is not valid until {at}; check this machine's clock, or wait")]
    NotYetValid { path: PathBuf, at: String },
}

/// One consistent set of material, read from [`TlsFiles`].
#[derive(Debug, Clone)]
pub struct Material {
    pub roots: Arc<RootCertStore>,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
    /// Who this process is: the trust domain and identity of its leaf.
    pub domain: TrustDomain,
    pub identity: Identity,
}

impl TlsFiles {
    /// Every file, for change detection.
    pub fn paths(&self) -> [&Path; 3] {
        [&self.ca, &self.cert, &self.key]
    }

    /// Reads and checks the set.
    pub fn load(&self) -> Result<Material, TlsError> {
        let roots = load_roots(&self.ca)?;
        let chain = load_certs(&self.cert, "certificate")?;
        let key = load_key(&self.key)?;
        let (domain, identity) = identity_of(&chain[0]).map_err(|e| match e {
            PeerIdentityError::None => TlsError::NoIdentity {
                path: self.cert.clone(),
            },
            PeerIdentityError::Parse(cause) => TlsError::Parse {
                path: self.cert.clone(),
                cause,
            },
            PeerIdentityError::Bad(cause) => TlsError::BadIdentity {
                path: self.cert.clone(),
                cause,
            },
        })?;
        check_validity(&self.cert, &chain[0])?;
        // The key must sign for the certificate: building a config checks it.
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth()
                    .with_single_cert(chain.clone(), key.clone_key())
            })
            .map_err(|e| TlsError::Mismatch {
                cert: self.cert.clone(),
                key: self.key.clone(),
                cause: e.to_string(),
            })?;
        Ok(Material {
            roots: Arc::new(roots),
            chain,
            key: Arc::new(key),
            domain,
            identity,
        })
    }
}

/// Refuses a leaf outside its validity period: a peer would refuse it in
/// the handshake, and say no more than that the handshake failed.
fn check_validity(path: &Path, leaf: &CertificateDer<'_>) -> Result<(), TlsError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(leaf.as_ref()).map_err(|e| TlsError::Parse {
            path: path.to_path_buf(),
            cause: e.to_string(),
        })?;
    let validity = parsed.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > validity.not_after {
        return Err(TlsError::Expired {
            path: path.to_path_buf(),
            at: validity.not_after.to_string(),
        });
    }
    if now < validity.not_before {
        return Err(TlsError::NotYetValid {
            path: path.to_path_buf(),
            at: validity.not_before.to_string(),
        });
    }
    Ok(())
}

/// A private key, in PEM.
pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Read {
        what: "key",
        path: path.to_path_buf(),
        cause: pem_error(e),
    })
}

/// PEM errors name what was wrong, never the bytes.
fn pem_error(error: rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => "no PEM private key found".into(),
        _ => "not valid PEM".into(),
    }
}

pub(crate) fn load_certs(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Read {
            what,
            path: path.to_path_buf(),
            cause: pem_error(e),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            what,
            path: path.to_path_buf(),
            expected: "CERTIFICATE",
        });
    }
    Ok(certs)
}

/// A CA bundle: at least one certificate, each a valid trust anchor.
pub(crate) fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path, "CA bundle")? {
        roots.add(cert).map_err(|e| TlsError::Ca {
            path: path.to_path_buf(),
            cause: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// Why a certificate names no identity.
#[derive(Debug)]
pub(crate) enum PeerIdentityError {
    None,
    Parse(String),
    Bad(IdentityError),
}

/// A certificate's serial number as the deny list writes it.
pub(crate) fn serial_of(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(crate::revoked::serial_hex(parsed.raw_serial()))
}

/// The trust domain and identity in a certificate's one `spiffe://` URI
/// SAN. Two such URIs are ambiguous and refused.
pub(crate) fn identity_of(
    cert: &CertificateDer<'_>,
) -> Result<(TrustDomain, Identity), PeerIdentityError> {
    use x509_parser::extensions::GeneralName;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| PeerIdentityError::Parse(e.to_string()))?;
    let san = parsed
        .subject_alternative_name()
        .map_err(|e| PeerIdentityError::Parse(e.to_string()))?;
    let mut uris = san
        .iter()
        .flat_map(|ext| ext.value.general_names.iter())
        .filter_map(|name| match name {
            GeneralName::URI(uri) if uri.starts_with("spiffe://") => Some(*uri),
            _ => None,
        });
    let (Some(uri), None) = (uris.next(), uris.next()) else {
        return Err(PeerIdentityError::None);
    };
    parse_uri(uri).map_err(PeerIdentityError::Bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node certificate (its own CA) valid from `from` to `to` days from
    /// now, written as a set in `dir`.
    fn set(dir: &Path, from: i64, to: i64) -> TlsFiles {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::URI(
            "spiffe://test.example/node/n1".try_into().unwrap(),
        )];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now + time::Duration::days(from);
        params.not_after = now + time::Duration::days(to);
        let cert = params.self_signed(&key).unwrap();
        let files = TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("cert.key"),
        };
        std::fs::write(&files.ca, cert.pem()).unwrap();
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn a_certificate_outside_its_validity_is_refused_with_the_date_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let expired = set(dir.path(), -30, -1);
        let error = expired.load().unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "certificate {} expired at ",
                expired.cert.display()
            )),
            "{error}"
        );
        assert!(error.contains("sms certs issue"), "{error}");

        let early = set(dir.path(), 2, 30);
        let error = early.load().unwrap_err().to_string();
        assert!(error.contains("is not valid until"), "{error}");
        assert!(error.contains("clock"), "{error}");

        assert!(set(dir.path(), -1, 30).load().is_ok());
    }
}
