//! rustls configurations built from [`Material`]: the server side asks
//! every client for a certificate but lets one without through (so an
//! admin holding only the token can still call, and the refusal is a clear
//! gRPC error rather than a failed handshake); the client side checks the
//! server's chain against our CA and then its SPIFFE identity instead of a
//! DNS name, so a node's certificate never passes for SMS even on SMS's
//! address.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::material::{identity_of, Material, TlsError};
use crate::spiffe::{Identity, TrustDomain};

/// gRPC runs over HTTP/2 only.
const ALPN_H2: &[u8] = b"h2";

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The server side of `material`: TLS 1.2+ with an optional, verified
/// client certificate.
pub(crate) fn server_config(material: &Material) -> Result<Arc<ServerConfig>, TlsError> {
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::clone(&material.roots), provider())
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::Ca {
                path: "(the CA bundle)".into(),
                cause: e.to_string(),
            })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| mismatch(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(material.chain.clone(), material.key.clone_key())
        .map_err(|e| mismatch(e.to_string()))?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// The client side of `material`, for a server that must be `expect`.
pub(crate) fn client_config(
    material: &Material,
    expect: Identity,
) -> Result<Arc<ClientConfig>, TlsError> {
    let verifier = SpiffeServerVerifier {
        roots: Arc::clone(&material.roots),
        domain: Some(material.domain.clone()),
        expect,
        provider: provider(),
    };
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| mismatch(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(material.chain.clone(), material.key.clone_key())
        .map_err(|e| mismatch(e.to_string()))?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// A client with no certificate of its own (an admin using the token, or
/// a CLI reading status with only the CA): it still checks the server.
pub(crate) fn anonymous_client_config(
    roots: Arc<RootCertStore>,
    expect: Identity,
) -> Result<Arc<ClientConfig>, TlsError> {
    let verifier = SpiffeServerVerifier {
        roots,
        domain: None,
        expect,
        provider: provider(),
    };
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| mismatch(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

fn mismatch(cause: String) -> TlsError {
    TlsError::Mismatch {
        cert: "(the certificate)".into(),
        key: "(the key)".into(),
        cause,
    }
}

/// Accepts a server whose chain ends at one of our roots and whose
/// `spiffe://` URI SAN is the identity we meant to reach, in our trust
/// domain (any domain our CA signs, for a client without a certificate of
/// its own). The DNS name or address we dialled plays no part.
#[derive(Debug)]
struct SpiffeServerVerifier {
    roots: Arc<RootCertStore>,
    domain: Option<TrustDomain>,
    expect: Identity,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for SpiffeServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        let found = identity_of(end_entity).map_err(|_| {
            rustls::Error::General("the server's certificate names no Spear identity".into())
        })?;
        let domain_ok = self.domain.as_ref().is_none_or(|d| *d == found.0);
        if !domain_ok || found.1 != self.expect {
            return Err(rustls::Error::General(format!(
                "the server is {} in trust domain {}, not the {} we meant to reach",
                found.1, found.0, self.expect
            )));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
