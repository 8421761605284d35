//! TLS to a service that is not Spear's (etcd). Entry point:
//! [`ServiceTls`]: its CA bundle and, when the service asks for one, a
//! client certificate, both re-read when their files change, so a rotated
//! certificate is used from the next connection on (SMS's connections to
//! etcd outlive any certificate cert-manager issues). The service's
//! certificate is checked the usual way (WebPKI: it chains to the CA and
//! names the host dialled), not as a SPIFFE identity.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tonic::transport::{Channel, Endpoint};

use crate::connector::BadAddress;
use crate::material::{load_certs, load_key, load_roots, TlsError};

fn refused(cert: &std::path::Path, key: &std::path::Path, cause: rustls::Error) -> TlsError {
    TlsError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        cause: cause.to_string(),
    }
}
use crate::reload::Watched;

/// Where the material is.
#[derive(Debug, Clone)]
pub struct ServiceTlsFiles {
    /// The CA bundle the service's certificate chains to.
    pub ca: PathBuf,
    /// A client certificate and its key, for a service that asks for one.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl ServiceTlsFiles {
    fn paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.ca.clone()];
        if let Some((cert, key)) = &self.identity {
            paths.extend([cert.clone(), key.clone()]);
        }
        paths
    }

    fn load(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let roots = load_roots(&self.ca)?;
        let builder = ClientConfig::builder_with_provider(crate::configs::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Ca {
                path: self.ca.clone(),
                cause: e.to_string(),
            })?
            .with_root_certificates(roots);
        let mut config = match &self.identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(load_certs(cert, "client certificate")?, load_key(key)?)
                .map_err(|e| refused(cert, key, e))?,
            None => builder.with_no_client_auth(),
        };
        // gRPC runs over HTTP/2 only.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The material, as of now.
#[derive(Clone)]
pub struct ServiceTls {
    config: Watched<Arc<ClientConfig>>,
}

impl std::fmt::Debug for ServiceTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceTls")
    }
}

impl ServiceTls {
    /// Reads the files (an error if they cannot be used now) and re-reads
    /// them when they change (keeping the last good material if the new
    /// cannot be used). Must run inside Tokio.
    pub fn load(files: ServiceTlsFiles) -> Result<Self, TlsError> {
        let paths = files.paths();
        let config = Watched::start("TLS material for etcd", paths, move || files.load())?;
        Ok(Self { config })
    }

    /// A channel to the first of `endpoints` (`host:port`, with or without
    /// `https://`) that answers, over TLS with the material current when
    /// each connection is made, connecting on first use.
    pub fn channel(
        &self,
        endpoints: &[String],
        connect_timeout: Duration,
    ) -> Result<Channel, BadAddress> {
        let mut targets = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let uri: Uri = spear_proto::grpc_url(endpoint)
                .parse()
                .map_err(|_| BadAddress {
                    addr: endpoint.clone(),
                })?;
            let host = uri
                .host()
                .ok_or_else(|| BadAddress {
                    addr: endpoint.clone(),
                })?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            targets.push((host, uri.port_u16().unwrap_or(2379)));
        }
        let first = targets.first().ok_or_else(|| BadAddress {
            addr: String::new(),
        })?;
        // The TLS is ours, so tonic sees an http:// URL (its host is only
        // the :authority; the dialer picks the endpoint).
        let endpoint = Endpoint::from_shared(format!("http://{}:{}", first.0, first.1))
            .map_err(|_| BadAddress {
                addr: first.0.clone(),
            })?
            .connect_timeout(connect_timeout)
            // Finds a service that went away without closing.
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5));
        let dialer = ServiceDialer {
            targets: targets.into(),
            next: Arc::new(AtomicUsize::new(0)),
            config: self.config.clone(),
        };
        Ok(endpoint.connect_with_connector_lazy(dialer))
    }
}

/// Dials the endpoints in turn, starting with the last that answered.
#[derive(Clone)]
struct ServiceDialer {
    targets: Arc<[(String, u16)]>,
    next: Arc<AtomicUsize>,
    config: Watched<Arc<ClientConfig>>,
}

type Connecting =
    Pin<Box<dyn Future<Output = Result<TokioIo<TlsStream<TcpStream>>, io::Error>> + Send>>;

impl tower_service::Service<Uri> for ServiceDialer {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let config = this.config.get();
            let start = this.next.load(Ordering::Relaxed);
            let mut last = io::Error::new(io::ErrorKind::NotConnected, "no etcd endpoint");
            for i in 0..this.targets.len() {
                let at = (start + i) % this.targets.len();
                let (host, port) = &this.targets[at];
                match connect(host, *port, Arc::clone(&config)).await {
                    Ok(stream) => {
                        this.next.store(at, Ordering::Relaxed);
                        return Ok(TokioIo::new(stream));
                    }
                    Err(error) => last = error,
                }
            }
            Err(last)
        })
    }
}

async fn connect(
    host: &str,
    port: u16,
    config: Arc<ClientConfig>,
) -> io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect((host, port)).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(host.to_string()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{host}' is not a host name or address"),
        )
    })?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}
