//! The metrics and probe endpoint over TLS when the process has TLS:
//! [`HttpListener`] is an axum listener on [`incoming_within`], so the
//! endpoint gets the same handshake deadline and connection bounds as the
//! gRPC ports. It asks for no client certificate: Prometheus verifies the
//! server with the installation's CA, and the kubelet's HTTPS probes verify
//! nothing and present nothing.

use std::io;
use std::net::SocketAddr;

use futures::StreamExt;
use tokio::net::TcpListener;
use tokio_stream::wrappers::ReceiverStream;

use crate::admission::Bounds;
use crate::incoming::{incoming_within, Conn, Peer, Protocol};
use crate::revoked::DenyList;
use crate::spiffe::Identity;
use crate::tls::TlsIdentity;

/// An axum listener serving HTTP/1.1 over TLS, or plaintext without `tls`.
pub struct HttpListener {
    conns: ReceiverStream<Result<Conn, io::Error>>,
    local: SocketAddr,
}

impl HttpListener {
    pub fn new(listener: TcpListener, tls: Option<TlsIdentity>) -> io::Result<Self> {
        let local = listener.local_addr()?;
        Ok(Self {
            conns: incoming_within(listener, tls, Bounds::default(), Protocol::Http1),
            local,
        })
    }
}

impl axum::serve::Listener for HttpListener {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            match self.conns.next().await {
                Some(Ok(conn)) => {
                    let addr = conn.peer().addr.unwrap_or(self.local);
                    return (conn, addr);
                }
                Some(Err(_)) => continue,
                // The accept loop only ends when this listener is dropped.
                None => std::future::pending::<()>().await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// Handlers read the connection's [`Peer`] with axum's `ConnectInfo`.
impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, HttpListener>>
    for Peer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, HttpListener>) -> Peer {
        stream.io().peer().clone()
    }
}

/// Who may read what a process reports about itself beyond its metrics
/// and probes (a node's `/status` and `/registry`): this machine, or a
/// caller with an admin's or SMS's certificate that `deny` does not list.
pub fn reads_reports(peer: &Peer, deny: &DenyList) -> bool {
    if peer.addr.is_some_and(|a| a.ip().is_loopback()) {
        return true;
    }
    match &peer.identity {
        Some(identity @ (Identity::Admin(_) | Identity::Sms)) => {
            !deny.refuses(identity, peer.serial.as_deref())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revoked::Revoked;

    fn peer(addr: &str, identity: Option<Identity>) -> Peer {
        Peer {
            addr: addr.parse().ok(),
            tls: true,
            identity,
            serial: Some("0a".into()),
        }
    }

    #[test]
    fn reports_are_for_this_machine_and_admins_not_revoked() {
        let deny = DenyList::default();
        let ops = Some(Identity::Admin("ops".into()));
        assert!(reads_reports(&peer("127.0.0.1:5000", None), &deny));
        assert!(!reads_reports(&peer("10.0.0.9:5000", None), &deny));
        assert!(reads_reports(&peer("10.0.0.9:5000", ops.clone()), &deny));
        assert!(reads_reports(
            &peer("10.0.0.9:5000", Some(Identity::Sms)),
            &deny
        ));
        assert!(!reads_reports(
            &peer("10.0.0.9:5000", Some(Identity::Node("b".into()))),
            &deny
        ));
        deny.replace([Revoked::Serial("0a".into())]);
        assert!(!reads_reports(&peer("10.0.0.9:5000", ops), &deny));
    }
}
