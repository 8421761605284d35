//! The client side: [`dial`] turns an address into a tonic [`Endpoint`]
//! and a [`Dialer`] that connects it, in plaintext or with TLS to the peer
//! identity the caller expects. Each new connection takes the TLS material
//! current at that moment, so a rotated certificate is used from the next
//! reconnect on.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};

use crate::spiffe::Identity;
use crate::tls::TlsIdentity;

/// How to reach one kind of peer: in plaintext, or with TLS to `expect`.
#[derive(Clone, Debug)]
pub struct Dialer {
    tls: Option<TlsIdentity>,
    expect: Identity,
    /// The local address to connect from (the system's choice when `None`).
    local: Option<std::net::IpAddr>,
}

/// Why an address cannot be dialled.
#[derive(Debug, thiserror::Error)]
#[error("'{addr}' is not a valid address: use host:port")]
pub struct BadAddress {
    pub addr: String,
}

/// An endpoint for `addr` and the dialer that connects it to `expect`.
pub fn dial(
    addr: &str,
    tls: Option<&TlsIdentity>,
    expect: Identity,
) -> Result<(Endpoint, Dialer), BadAddress> {
    // The TLS here is ours, so tonic always sees an http:// URL.
    let url = spear_proto::grpc_url(addr).replacen("https://", "http://", 1);
    let endpoint = Endpoint::from_shared(url).map_err(|_| BadAddress {
        addr: addr.to_string(),
    })?;
    let dialer = Dialer {
        tls: tls.cloned(),
        expect,
        local: None,
    };
    Ok((endpoint, dialer))
}

impl Dialer {
    /// Connects from `local` (a host with several addresses; the fleet
    /// benchmark, whose nodes each have their own) instead of the
    /// system's choice.
    pub fn from_address(mut self, local: std::net::IpAddr) -> Dialer {
        self.local = Some(local);
        self
    }

    /// Connects now.
    pub async fn connect(self, endpoint: Endpoint) -> Result<Channel, tonic::transport::Error> {
        endpoint.connect_with_connector(self).await
    }

    /// Connects on first use, and again after a connection breaks.
    pub fn connect_lazy(self, endpoint: Endpoint) -> Channel {
        endpoint.connect_with_connector_lazy(self)
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// The stream a [`Dialer`] connects.
pub type Stream = TokioIo<MaybeTls>;

/// A plaintext or TLS client stream.
pub enum MaybeTls {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

type Connecting = Pin<Box<dyn Future<Output = Result<Stream, io::Error>> + Send>>;

impl tower_service::Service<Uri> for Dialer {
    type Response = Stream;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host"))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(80);
            let tcp = match this.local {
                None => TcpStream::connect((host.as_str(), port)).await?,
                Some(local) => connect_from(local, &host, port).await?,
            };
            tcp.set_nodelay(true)?;
            crate::keepalive::set(&tcp, &crate::keepalive::DIALING);
            let Some(tls) = &this.tls else {
                return Ok(TokioIo::new(MaybeTls::Plain(tcp)));
            };
            let config = tls
                .client_config(&this.expect)
                .map_err(|e| io::Error::other(e.to_string()))?;
            // The verifier checks the SPIFFE identity, not this name; it is
            // sent as SNI for DNS names only.
            let name = ServerName::try_from(host).unwrap_or(ServerName::IpAddress(
                std::net::IpAddr::from([0, 0, 0, 0]).into(),
            ));
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(MaybeTls::Tls(Box::new(stream))))
        })
    }
}

/// A TCP connection to `host:port` from the address `local`.
async fn connect_from(local: std::net::IpAddr, host: &str, port: u16) -> io::Result<TcpStream> {
    let peer = tokio::net::lookup_host((host, port))
        .await?
        .find(|peer| peer.is_ipv4() == local.is_ipv4())
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address of that family"))?;
    let socket = match local {
        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.bind(std::net::SocketAddr::new(local, 0))?;
    socket.connect(peer).await
}

impl tokio::io::AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
