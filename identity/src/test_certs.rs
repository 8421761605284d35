//! Certificates for unit tests: a CA and leaves it signs, as
//! [`Material`] or as files on disk.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use rustls::RootCertStore;

use crate::material::{identity_of, Material, TlsFiles};

/// A new CA: its issuer and its self-signed certificate.
fn new_ca() -> (rcgen::Issuer<'static, rcgen::KeyPair>, rcgen::Certificate) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.clone().self_signed(&ca_key).unwrap();
    (rcgen::Issuer::new(ca_params, ca_key), ca_cert)
}

/// A new CA: its issuer and its certificate.
pub(crate) fn a_ca() -> (
    rcgen::Issuer<'static, rcgen::KeyPair>,
    CertificateDer<'static>,
) {
    let (issuer, cert) = new_ca();
    (issuer, cert.der().clone())
}

/// Writes a new CA and one leaf it signs for each of `uris` under `dir`,
/// as the files a process loads.
pub(crate) fn written(dir: &std::path::Path, uris: &[&str]) -> Vec<TlsFiles> {
    let (ca, ca_cert) = new_ca();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    uris.iter()
        .enumerate()
        .map(|(i, uri)| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::default();
            params.subject_alt_names = vec![rcgen::SanType::URI((*uri).try_into().unwrap())];
            let leaf = params.signed_by(&key, &ca).unwrap();
            let files = TlsFiles {
                ca: dir.join("ca.pem"),
                cert: dir.join(format!("{i}.pem")),
                key: dir.join(format!("{i}.key")),
            };
            std::fs::write(&files.cert, leaf.pem()).unwrap();
            std::fs::write(&files.key, key.serialize_pem()).unwrap();
            files
        })
        .collect()
}

/// A CA and one leaf it signs for `uri`, as [`Material`].
pub(crate) fn material(
    ca: &rcgen::Issuer<'_, rcgen::KeyPair>,
    ca_der: &CertificateDer<'static>,
    uri: &str,
) -> Material {
    material_dated(ca, ca_der, uri, -365, 365)
}

/// [`material`] valid from `from` to `to` days from now.
pub(crate) fn material_dated(
    ca: &rcgen::Issuer<'_, rcgen::KeyPair>,
    ca_der: &CertificateDer<'static>,
    uri: &str,
    from: i64,
    to: i64,
) -> Material {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now + time::Duration::days(from);
    params.not_after = now + time::Duration::days(to);
    params.subject_alt_names = vec![rcgen::SanType::URI(uri.try_into().unwrap())];
    let leaf = params.signed_by(&key, ca).unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(ca_der.clone()).unwrap();
    let (domain, identity) = identity_of(leaf.der()).unwrap();
    Material {
        roots: Arc::new(roots),
        chain: vec![leaf.der().clone()],
        key: Arc::new(PrivatePkcs8KeyDer::from(key.serialize_der()).into()),
        domain,
        identity,
    }
}
