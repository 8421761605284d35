//! A minimal HTTP/1.1 GET for reading the binaries' status endpoints, in
//! plaintext (`host:port`) or over TLS (`https://host:port`, verified
//! against the CAs given to [`trust`]; the name is not checked, as Spear's
//! certificates name SPIFFE identities rather than hosts).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

static TRUSTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// The client certificate and key `https://` requests present, if any.
static PRESENT: Mutex<Option<(PathBuf, PathBuf)>> = Mutex::new(None);

/// Presents this certificate and key (an admin's) on `https://` requests,
/// as an operator reading a node's reports from another machine would.
pub fn present(cert: &Path, key: &Path) {
    *PRESENT.lock().unwrap_or_else(|e| e.into_inner()) =
        Some((cert.to_path_buf(), key.to_path_buf()));
}

/// Trusts the CA bundle at `ca` for `https://` addresses.
pub fn trust(ca: &Path) {
    let mut trusted = TRUSTED.lock().unwrap_or_else(|e| e.into_inner());
    if !trusted.iter().any(|p| p == ca) {
        trusted.push(ca.to_path_buf());
    }
}

/// The chain must lead to a trusted CA; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in TRUSTED.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        // Another test's CA may be gone with its temporary directory.
        let Ok(certs) = CertificateDer::pem_file_iter(ca) else {
            continue;
        };
        for cert in certs {
            roots
                .add(cert.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::clone(&provider),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)));
    let present = PRESENT.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut config = match present {
        Some((cert, key)) => {
            use rustls::pki_types::PrivateKeyDer;
            let chain = CertificateDer::pem_file_iter(&cert)
                .map_err(|e| e.to_string())?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// GETs `path` from `addr` (host:port); returns the body of a 200 response.
pub fn get(addr: &str, path: &str) -> Result<String, String> {
    match get_status(addr, path)? {
        (200, body) => Ok(body),
        (code, _) => Err(format!("GET {path}: HTTP {code}")),
    }
}

/// GETs `path` from `addr`; returns the status code and the body, whatever
/// the code (probes answer 503 with a reason).
pub fn get_status(addr: &str, path: &str) -> Result<(u16, String), String> {
    let (tls, addr) = match addr.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, addr),
    };
    let tcp = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut bytes = Vec::new();
    let read = if tls {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let conn = rustls::ClientConnection::new(tls_config()?, name).map_err(|e| e.to_string())?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("TLS to {addr}: {e}"))?;
        stream.read_to_end(&mut bytes)
    } else {
        let mut stream = tcp;
        stream
            .write_all(request.as_bytes())
            .map_err(|e| e.to_string())?;
        stream.read_to_end(&mut bytes)
    };
    // A TLS peer that closes without close_notify still sent it all.
    if let Err(e) = read {
        if bytes.is_empty() {
            return Err(format!("read {addr}{path}: {e}"));
        }
    }
    let response = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            format!(
                "GET {path}: no status in {}",
                head.lines().next().unwrap_or("")
            )
        })?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok((code, dechunk(body)));
    }
    Ok((code, body.to_string()))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// GETs a JSON document.
pub fn get_json(addr: &str, path: &str) -> Result<serde_json::Value, String> {
    let body = get(addr, path)?;
    serde_json::from_str(&body).map_err(|e| format!("{path} is not JSON ({e}): {body}"))
}

/// The value of an unlabelled metric in the Prometheus text at
/// `addr/metrics`; an error when the endpoint or the metric is missing.
pub fn metric(addr: &str, name: &str) -> Result<f64, String> {
    let text = get(addr, "/metrics")?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no metric {name} at {addr}"))
}
