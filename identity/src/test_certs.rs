//! Certificates for unit tests: a CA and leaves it signs, as
//! [`Material`].

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use rustls::RootCertStore;

use crate::material::{identity_of, Material};

/// A new CA: its issuer and its certificate.
pub(crate) fn a_ca() -> (
    rcgen::Issuer<'static, rcgen::KeyPair>,
    CertificateDer<'static>,
) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_der = ca_params
        .clone()
        .self_signed(&ca_key)
        .unwrap()
        .der()
        .clone();
    (rcgen::Issuer::new(ca_params, ca_key), ca_der)
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
