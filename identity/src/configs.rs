//! rustls configurations built from [`Material`]: the server side asks
//! every client for a certificate but lets one without through (so an
//! admin holding only the token can still call, and the refusal is a clear
//! gRPC error rather than a failed handshake); the client side checks the
//! server's chain against our CA and then its SPIFFE identity instead of a
//! DNS name, so a node's certificate never passes for SMS even on SMS's
//! address.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WantsClientCert;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{
    ClientConfig, ConfigBuilder, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme,
};

use crate::material::{identity_of, Material, TlsError};
use crate::spiffe::{Identity, TrustDomain};
use crate::tickets::Tickets;

/// gRPC runs over HTTP/2 only.
const ALPN_H2: &[u8] = b"h2";

/// aws-lc-rs with its default suites, AES-128-GCM with SHA-256 first.
///
/// Why first: our certificates are P-256 and our key exchange X25519, both
/// about 128-bit strong, so AES-256 with SHA-384 adds no strength to the
/// connection; and SHA-384 has no instructions of its own on x86, where
/// SHA-256 does. Every handshake's key schedule and transcript hash run in
/// it: SHA-384 was 5 % of SMS's CPU while 10,000 nodes reconnected
/// (docs/benchmarks.md). Peers that offer only the others still get them.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|suite| suite.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(provider)
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
    // One ticket per handshake, sealed with a key this process derives
    // again after a restart (`crate::tickets`): a fleet reconnecting to a
    // restarted SMS resumes rather than repeats its certificates. Nothing
    // is kept server-side (rustls' default cache of 256 sessions resumed
    // nothing for a fleet of thousands). One, not rustls' two: a node
    // reconnects with one and gets the next in that handshake.
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    match Tickets::for_material(material) {
        Some(tickets) => {
            config.ticketer = tickets;
            config.send_tls13_tickets = 1;
        }
        None => config.send_tls13_tickets = 0,
    }
    Ok(Arc::new(config))
}

/// The client side of `material`, for a server that must be `expect`.
pub(crate) fn client_config(
    material: &Material,
    expect: Identity,
) -> Result<Arc<ClientConfig>, TlsError> {
    let config = client_builder(
        Arc::clone(&material.roots),
        Some(material.domain.clone()),
        expect,
    )?
    .with_client_auth_cert(material.chain.clone(), material.key.clone_key())
    .map_err(|e| mismatch(e.to_string()))?;
    Ok(h2(config))
}

/// A client with no certificate of its own (an admin using the token, or
/// a CLI reading status with only the CA): it still checks the server.
pub(crate) fn anonymous_client_config(
    roots: Arc<RootCertStore>,
    expect: Identity,
) -> Result<Arc<ClientConfig>, TlsError> {
    Ok(h2(
        client_builder(roots, None, expect)?.with_no_client_auth()
    ))
}

/// A client that checks the server with [`SpiffeServerVerifier`], short
/// of its own certificate (or none).
fn client_builder(
    roots: Arc<RootCertStore>,
    domain: Option<TrustDomain>,
    expect: Identity,
) -> Result<ConfigBuilder<ClientConfig, WantsClientCert>, TlsError> {
    let verifier = SpiffeServerVerifier {
        roots,
        domain,
        expect,
        provider: provider(),
    };
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| mismatch(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier)))
}

/// `config`, speaking gRPC's HTTP/2.
fn h2(mut config: ClientConfig) -> Arc<ClientConfig> {
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Arc::new(config)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certs::{a_ca, material, material_dated};
    use rustls::{ClientConnection, ServerConnection};

    /// What one in-memory handshake ended with.
    struct Shook {
        /// The server's side, after the handshake.
        server: ServerConnection,
        suite: rustls::CipherSuite,
        kind: rustls::HandshakeKind,
        /// Tickets the client was given.
        tickets: usize,
        /// The client's leaf as the server holds it.
        client_leaf: Option<CertificateDer<'static>>,
    }

    /// Runs a handshake between `client` and `server` in memory.
    fn handshake(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>) -> Shook {
        let name = ServerName::try_from("sms.test").unwrap();
        let mut client = ClientConnection::new(Arc::clone(client), name).unwrap();
        let mut server = ServerConnection::new(Arc::clone(server)).unwrap();
        while client.is_handshaking() || server.is_handshaking() {
            let mut bytes = Vec::new();
            client.write_tls(&mut bytes).unwrap();
            server.read_tls(&mut bytes.as_slice()).unwrap();
            server.process_new_packets().unwrap();
            bytes.clear();
            server.write_tls(&mut bytes).unwrap();
            client.read_tls(&mut bytes.as_slice()).unwrap();
            client.process_new_packets().unwrap();
        }
        // One more flight: the tickets follow the server's Finished.
        let mut bytes = Vec::new();
        server.write_tls(&mut bytes).unwrap();
        client.read_tls(&mut bytes.as_slice()).unwrap();
        client.process_new_packets().unwrap();
        let suite = client.negotiated_cipher_suite().unwrap().suite();
        assert_eq!(
            Some(suite),
            server.negotiated_cipher_suite().map(|s| s.suite())
        );
        let kind = client.handshake_kind().unwrap();
        assert_eq!(Some(kind), server.handshake_kind());
        Shook {
            suite,
            kind,
            tickets: client.tls13_tickets_received() as usize,
            client_leaf: server
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|leaf| leaf.clone().into_owned()),
            server,
        }
    }

    #[test]
    fn our_peers_agree_on_aes_128_with_one_ticket_and_a_peer_offering_only_aes_256_still_connects()
    {
        let (ca, ca_der) = a_ca();
        let sms = material(&ca, &ca_der, "spiffe://test.example/sms");
        let node = material(&ca, &ca_der, "spiffe://test.example/node/n1");
        let server = server_config(&sms).unwrap();

        let ours = client_config(&node, Identity::Sms).unwrap();
        let shook = handshake(&ours, &server);
        assert_eq!(shook.suite, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        assert_eq!(
            shook.tickets, 1,
            "one ticket per handshake (`server_config`)"
        );

        // A client whose library prefers, or only has, AES-256.
        let mut aes_256 = rustls::crypto::aws_lc_rs::default_provider();
        aes_256
            .cipher_suites
            .retain(|s| s.suite() == rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
        let only_256 = ClientConfig::builder_with_provider(Arc::new(aes_256))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SpiffeServerVerifier {
                roots: Arc::clone(&node.roots),
                domain: Some(node.domain.clone()),
                expect: Identity::Sms,
                provider: provider(),
            }))
            .with_client_auth_cert(node.chain.clone(), node.key.clone_key())
            .unwrap();
        assert_eq!(
            handshake(&Arc::new(only_256), &server).suite,
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384
        );
    }

    #[test]
    fn a_node_resumes_with_a_restarted_sms_and_keeps_its_certificate_but_not_with_another() {
        let (ca, ca_der) = a_ca();
        let sms = material(&ca, &ca_der, "spiffe://test.example/sms");
        let node = material(&ca, &ca_der, "spiffe://test.example/node/n1");
        // The node's configuration lives as long as the node: its tickets
        // with it.
        let to_sms = client_config(&node, Identity::Sms).unwrap();

        let first = handshake(&to_sms, &server_config(&sms).unwrap());
        assert_eq!(first.kind, rustls::HandshakeKind::Full);

        // SMS restarts: a new configuration from the same files.
        let restarted = server_config(&sms).unwrap();
        let resumed = handshake(&to_sms, &restarted);
        assert_eq!(resumed.kind, rustls::HandshakeKind::Resumed);
        // The server still knows who the node is (its identity and serial
        // come from this leaf, and revocation with them).
        assert_eq!(resumed.client_leaf.as_ref(), Some(&node.chain[0]));
        assert_eq!(resumed.tickets, 1, "and the node has its next ticket");
        assert_eq!(
            handshake(&to_sms, &restarted).kind,
            rustls::HandshakeKind::Resumed
        );

        // Another SMS key (a replica, a re-keyed SMS): the ticket opens
        // nothing there, and the node proves its certificate again.
        let mut rekeyed = material(&ca, &ca_der, "spiffe://test.example/sms");
        rekeyed.roots = Arc::clone(&sms.roots);
        let other = handshake(&to_sms, &server_config(&rekeyed).unwrap());
        assert_eq!(other.kind, rustls::HandshakeKind::Full);
        assert_eq!(other.client_leaf.as_ref(), Some(&node.chain[0]));
    }

    /// A clock `days` from now, as rustls reads it.
    #[derive(Debug)]
    struct Shifted(i64);
    impl rustls::time_provider::TimeProvider for Shifted {
        fn current_time(&self) -> Option<rustls::pki_types::UnixTime> {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64
                + self.0 * 24 * 3600;
            Some(rustls::pki_types::UnixTime::since_unix_epoch(
                std::time::Duration::from_secs(now as u64),
            ))
        }
    }

    #[test]
    fn a_session_whose_certificate_expired_since_is_refused_on_resumption() {
        let (ca, ca_der) = a_ca();
        let sms = material(&ca, &ca_der, "spiffe://test.example/sms");
        // The node's certificate was good from ten days ago to yesterday.
        let node = material_dated(&ca, &ca_der, "spiffe://test.example/node/n1", -10, -1);
        let to_sms = client_config(&node, Identity::Sms).unwrap();

        // Its session began five days ago, while the certificate held.
        let mut then = (*server_config(&sms).unwrap()).clone();
        then.time_provider = Arc::new(Shifted(-5));
        let first = handshake(&to_sms, &Arc::new(then));
        assert_eq!(first.kind, rustls::HandshakeKind::Full);
        assert_eq!(crate::tickets::resumed_outside_dates(&first.server), None);

        // Today it resumes (rustls does not look at the chain again) and
        // is refused for its dates.
        let resumed = handshake(&to_sms, &server_config(&sms).unwrap());
        assert_eq!(resumed.kind, rustls::HandshakeKind::Resumed);
        let why = crate::tickets::resumed_outside_dates(&resumed.server).unwrap();
        assert!(why.starts_with("its certificate expired at "), "{why}");

        // A node whose certificate holds resumes and is let through.
        let good = material(&ca, &ca_der, "spiffe://test.example/node/n2");
        let to_sms = client_config(&good, Identity::Sms).unwrap();
        handshake(&to_sms, &server_config(&sms).unwrap());
        let resumed = handshake(&to_sms, &server_config(&sms).unwrap());
        assert_eq!(resumed.kind, rustls::HandshakeKind::Resumed);
        assert_eq!(crate::tickets::resumed_outside_dates(&resumed.server), None);
    }
}
