//! The server side of a gRPC port: [`incoming`] accepts TCP connections,
//! completes each TLS handshake on its own task (with a deadline, and
//! within the [`Admission`] bounds, which drop a flooding source's oldest
//! connection rather than refuse a newcomer, so a flood cannot lock anyone
//! out, and make a fleet coming back at once wait its turn rather than
//! drop its handshakes half done), and hands tonic a [`Conn`]
//! whose connect info is the
//! [`Peer`]: its address and, when it showed a certificate of ours, its
//! identity. Services read the peer with [`crate::Caller`]; the
//! [`crate::Gate`] refuses callers without a credential before their
//! request body is read.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::debug;

use crate::admission::{Admission, AnonymousSlot, Bounds};
use crate::material::{identity_of, serial_of};
use crate::spiffe::Identity;
use crate::tls::TlsIdentity;

/// A handshake that takes longer than this is dropped: ours take a few
/// milliseconds, a client across the world well under a second.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(5);

/// A connection that has not spoken is dropped after [`HANDSHAKE_WITHIN`]
/// plus up to this much, spread by its slot: silent connections opened in
/// one burst then end (and are reopened) spread out, not all at once.
const SILENT_SPREAD: Duration = Duration::from_millis(2500);

/// How long connection number `id` may stay silent.
fn silent_for(id: u64) -> Duration {
    // Fibonacci hashing: consecutive ids land far apart in 0..1024.
    let step = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54;
    HANDSHAKE_WITHIN + SILENT_SPREAD.mul_f64(step as f64 / 1024.0)
}

/// Streams one client may have open on one connection: a node needs one
/// watch and a few unary calls; SMS sends a node at most its run slots.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// Request headers larger than this are refused: ours are a few hundred
/// bytes and an admin token a few KiB, but a person's ID token may be up
/// to [`crate::oidc::MAX_TOKEN_BYTES`] (64 KiB), with room for the rest.
pub const MAX_HEADER_BYTES: u32 = 80 * 1024;

/// A tonic server with the HTTP/2 limits every Spear port shares: small
/// windows that grow for real transfers, bounded streams per connection
/// and header size, the rapid-reset guard, and keepalives that find dead
/// peers. Message sizes are set per service, to what each RPC needs.
pub fn server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        // Flow-control windows start at HTTP/2's 64 KiB and grow with the
        // measured bandwidth-delay product of a transfer that goes on, so
        // a request refused from its headers has sent little of its body.
        .http2_adaptive_window(Some(true))
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .http2_max_header_list_size(MAX_HEADER_BYTES)
        .http2_max_pending_accept_reset_streams(Some(64))
        // A peer that went away is found by the kernel
        // (`crate::keepalive`); this ping finds one whose connection is
        // there but that answers nothing, and is rare: it goes only after
        // this long without a frame from the peer.
        .http2_keepalive_interval(Some(H2_PING_AFTER))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
}

/// An HTTP/2 ping goes to a peer SMS has read nothing from for this long.
/// A following node sends nothing while nothing changes, so at 10,000
/// nodes this is 33 pings a second, a sixth of what the idle fleet costs.
/// It finds only a peer process that stopped answering while its host's
/// kernel still does; one whose host went away is found sooner, by the
/// progress frame that is not acknowledged (`crate::keepalive`).
const H2_PING_AFTER: Duration = Duration::from_secs(300);

/// Connections the kernel holds for SMS to accept (capped by
/// `net.core.somaxconn`, 4096 on current kernels). Tokio's default of 1,024
/// overflowed when 10,000 nodes came back at once after a restart (the
/// fleet bench): the kernel drops what does not fit, and each node so
/// dropped waits out TCP's retransmit before it is even accepted.
const ACCEPT_BACKLOG: u32 = 4096;

/// Binds the gRPC port at `addr` with room for a reconnecting fleet in
/// its accept queue.
pub async fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As std's and tokio's own bind: a restarted SMS takes its port back
    // while the old connections are in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub addr: Option<SocketAddr>,
    /// The connection is TLS.
    pub tls: bool,
    /// The identity in its certificate, when it presented one of ours in
    /// our trust domain.
    pub identity: Option<Identity>,
    /// That certificate's serial number (lowercase hex), for revocation.
    pub serial: Option<String>,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// One accepted connection.
pub struct Conn {
    io: Io,
    peer: Peer,
    /// Held while a connection without an identity is open.
    _anonymous: Option<AnonymousSlot>,
}

impl Conn {
    /// Who is on the other end.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }
}

impl Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

/// What a port speaks over TLS, as its ALPN says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// gRPC: HTTP/2.
    Grpc,
    /// The metrics and probe endpoint: HTTP/1.1, as Prometheus and the
    /// kubelet speak it.
    Http1,
}

/// Accepts gRPC connections on `listener`: TLS with `tls`, plaintext
/// without, within the default [`Bounds`]. The stream ends when tonic
/// drops it.
pub fn incoming(
    listener: TcpListener,
    tls: Option<TlsIdentity>,
) -> ReceiverStream<Result<Conn, io::Error>> {
    incoming_within(listener, tls, Bounds::default(), Protocol::Grpc)
}

/// [`incoming`] with other bounds (tests use small ones) or protocol.
pub fn incoming_within(
    listener: TcpListener,
    tls: Option<TlsIdentity>,
    bounds: Bounds,
    protocol: Protocol,
) -> ReceiverStream<Result<Conn, io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    let admission = Admission::new(bounds);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tx.closed() => return,
            };
            let (tcp, addr) = match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Out of descriptors and the like: wait, do not spin.
                    debug!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            crate::keepalive::set(&tcp, &crate::keepalive::SERVING);
            let tx = tx.clone();
            let Some(tls) = tls.clone() else {
                // Plaintext (loopback or --insecure): nothing to wait for,
                // and nobody has an identity to bound connections by.
                let conn = Conn {
                    io: Io::Plain(tcp),
                    peer: Peer {
                        addr: Some(addr),
                        tls: false,
                        identity: None,
                        serial: None,
                    },
                    _anonymous: None,
                };
                if tx.send(Ok(conn)).await.is_err() {
                    return;
                }
                continue;
            };
            // While the port is full of sources holding one connection
            // each, this waits: the rest stay in the kernel's accept queue.
            let (mut slot, mut evicted) = tokio::select! {
                admitted = admission.handshake(addr.ip()) => admitted,
                _ = tx.closed() => return,
            };
            let admission = admission.clone();
            tokio::spawn(async move {
                let conn = tokio::select! {
                    conn = async {
                        // Silent until its first byte is here (peeked, not
                        // read: `readable` alone wakes spuriously), then
                        // waiting for a handshake slot if all are taken;
                        // both within its silent deadline.
                        let mut first = [0u8; 1];
                        let wait = silent_for(slot.id());
                        let spoke = async {
                            match tcp.peek(&mut first).await {
                                Ok(n) if n > 0 => {
                                    slot.speaking().await;
                                    true
                                }
                                _ => false,
                            }
                        };
                        if !matches!(tokio::time::timeout(wait, spoke).await, Ok(true)) {
                            return None;
                        }
                        handshake(tcp, addr, &tls, protocol).await
                    } => conn,
                    _ = &mut evicted => {
                        debug!(peer = %addr, stage = ?slot.stage(), "handshake dropped to make room for newer connections");
                        return;
                    }
                };
                drop(slot);
                let Some(mut conn) = conn else { return };
                if conn.peer.identity.is_none() {
                    match admission.anonymous(addr.ip()) {
                        Some(slot) => conn._anonymous = Some(slot),
                        None => {
                            debug!(peer = %addr, "too many connections without a certificate: closed");
                            return;
                        }
                    }
                }
                let _ = tx.send(Ok(conn)).await;
            });
        }
    });
    ReceiverStream::new(rx)
}

async fn handshake(
    tcp: TcpStream,
    addr: SocketAddr,
    tls: &TlsIdentity,
    protocol: Protocol,
) -> Option<Conn> {
    let mut config = tls.server_config()?;
    if protocol == Protocol::Http1 {
        let mut http1 = (*config).clone();
        http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        config = std::sync::Arc::new(http1);
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let stream = match tokio::time::timeout(HANDSHAKE_WITHIN, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            debug!(peer = %addr, %error, "TLS handshake refused");
            return None;
        }
        Err(_) => {
            debug!(peer = %addr, "TLS handshake did not finish within {HANDSHAKE_WITHIN:?}");
            return None;
        }
    };
    // A resumed session skipped the chain: its dates are checked here.
    if let Some(why) = crate::tickets::resumed_outside_dates(stream.get_ref().1) {
        debug!(peer = %addr, "resumed TLS session closed: {why}; the peer's next handshake proves its certificate again");
        return None;
    }
    let own_domain = tls.identity().map(|(domain, _)| domain);
    let leaf = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first());
    let serial = leaf.and_then(serial_of);
    let identity = leaf.and_then(|leaf| match identity_of(leaf) {
            Ok((domain, identity)) if Some(&domain) == own_domain.as_ref() => Some(identity),
            Ok((domain, identity)) => {
                debug!(peer = %addr, %domain, %identity, "certificate from another trust domain: no role");
                None
            }
            Err(_) => {
                debug!(peer = %addr, "certificate names no Spear identity: no role");
                None
            }
        });
    Some(Conn {
        io: Io::Tls(Box::new(stream)),
        peer: Peer {
            addr: Some(addr),
            tls: true,
            identity,
            serial,
        },
        _anonymous: None,
    })
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_deadlines_spread_a_burst_over_the_spread() {
        let waits: Vec<Duration> = (0..1000).map(silent_for).collect();
        assert!(waits
            .iter()
            .all(|w| *w >= HANDSHAKE_WITHIN && *w < HANDSHAKE_WITHIN + SILENT_SPREAD));
        // A burst of consecutive connections ends across the whole spread,
        // in every tenth of it.
        let mut tenths = [0usize; 10];
        for w in &waits {
            let into = (*w - HANDSHAKE_WITHIN).as_secs_f64() / SILENT_SPREAD.as_secs_f64();
            tenths[(into * 10.0) as usize] += 1;
        }
        assert!(tenths.iter().all(|n| *n > 50), "{tenths:?}");
    }
}
