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

    /// Opens a TLS connection to `endpoint` only to be given a new session
    /// ticket, and closes it. A node holds the connection it follows SMS
    /// on for days, while a ticket resumes a session for at most a week
    /// (`crate::tickets`): this keeps a fresh one for the reconnect after
    /// SMS restarts. `None` in plaintext, where there is nothing to renew.
    pub async fn renew_ticket(mut self, endpoint: &Endpoint) -> io::Result<Option<Renewed>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let stream = tower_service::Service::call(&mut self, endpoint.uri().clone()).await?;
        let MaybeTls::Tls(mut tls) = stream.into_inner() else {
            return Ok(None);
        };
        // The ticket follows the handshake; the server's first bytes
        // (HTTP/2 settings) follow the ticket. Once one byte is read, so
        // is the ticket; a server that sends nothing is left after a while.
        let mut first = [0u8; 1];
        let _ = tokio::time::timeout(TICKET_WITHIN, tls.read(&mut first)).await;
        let session = tls.get_ref().1;
        let renewed = Renewed {
            resumed: session.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            tickets: session.tls13_tickets_received(),
        };
        let _ = tls.shutdown().await;
        Ok(Some(renewed))
    }
}

/// How long [`Dialer::renew_ticket`] waits for the server's first bytes.
const TICKET_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// What [`Dialer::renew_ticket`]'s connection did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    /// It resumed with the ticket held before.
    pub resumed: bool,
    /// Tickets it was given (the server sends one).
    pub tickets: u32,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Bounds;
    use crate::incoming::{incoming_within, listen, Protocol};
    use crate::test_certs::written;
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn renewing_resumes_with_the_last_ticket_and_leaves_a_new_one_with_the_peer_known() {
        let dir = tempfile::tempdir().unwrap();
        let files = written(
            dir.path(),
            &["spiffe://test.example/sms", "spiffe://test.example/node/n1"],
        );
        let sms = TlsIdentity::load_once(&files[0]).unwrap();
        let node = TlsIdentity::load_once(&files[1]).unwrap();
        let listener = listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mut conns = incoming_within(listener, Some(sms), Bounds::default(), Protocol::Grpc);
        // The server's side: says something first, as HTTP/2 does, and
        // tells whom it accepted.
        let (seen, mut peers) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(Ok(mut conn)) = conns.next().await {
                let _ = seen.send(conn.peer().identity.clone());
                let _ = conn.write_all(b"x").await;
                tokio::spawn(async move {
                    let mut rest = Vec::new();
                    let _ = tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut rest).await;
                });
            }
        });

        let renew = || async {
            let (endpoint, dialer) = dial(&addr, Some(&node), Identity::Sms).unwrap();
            dialer.renew_ticket(&endpoint).await.unwrap().unwrap()
        };
        let n1: Identity = "node/n1".parse().unwrap();
        assert_eq!(
            renew().await,
            Renewed {
                resumed: false,
                tickets: 1
            }
        );
        assert_eq!(peers.recv().await.unwrap(), Some(n1.clone()));
        // Each renewal spends the ticket it holds and leaves the next: had
        // the second not read its ticket, the third would be a full
        // handshake.
        for _ in 0..2 {
            assert_eq!(
                renew().await,
                Renewed {
                    resumed: true,
                    tickets: 1
                }
            );
            assert_eq!(peers.recv().await.unwrap(), Some(n1.clone()));
        }

        // In plaintext there is nothing to renew.
        let (endpoint, dialer) = dial(&addr, None, Identity::Sms).unwrap();
        assert_eq!(dialer.renew_ticket(&endpoint).await.unwrap(), None);
    }
}
