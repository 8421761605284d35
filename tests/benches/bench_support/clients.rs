//! Bench watch clients: real tonic clients reading real streams.

use spear_identity::{dial, Identity, TlsIdentity};
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{watch_event, WatchEvent, WatchRequest};
use tonic::transport::Channel;
use tonic::Streaming;

/// A new HTTP/2 connection to SMS.
pub async fn connect(addr: &str) -> Channel {
    connect_as(addr, None).await
}

/// A new connection to SMS, over mutual TLS as `tls` when given (a full
/// handshake: every connection is a new TLS session).
pub async fn connect_as(addr: &str, tls: Option<&TlsIdentity>) -> Channel {
    try_connect_as(addr, tls)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

/// One connection attempt, as a node makes it (its connect timeout).
pub async fn try_connect_as(
    addr: &str,
    tls: Option<&TlsIdentity>,
) -> Result<Channel, tonic::transport::Error> {
    let (endpoint, dialer) = dial(addr, tls, Identity::Sms).unwrap_or_else(|e| panic!("{e}"));
    dialer
        .connect(endpoint.connect_timeout(spearlet::sms_link::CONNECT_TIMEOUT))
        .await
}

/// Opens a watch from `(epoch, revision)` as node `bench-{node}`.
pub async fn watch(
    channel: Channel,
    node: usize,
    epoch: u64,
    revision: u64,
) -> Result<Streaming<WatchEvent>, tonic::Status> {
    let mut client = RegistryClient::new(channel).max_decoding_message_size(64 * 1024 * 1024);
    let response = client
        .watch(WatchRequest {
            node_id: format!("bench-{node}"),
            epoch,
            revision,
        })
        .await?;
    Ok(response.into_inner())
}

/// What a bench client tracks of the stream.
#[derive(Debug, Default, Clone, Copy)]
pub struct Position {
    pub epoch: u64,
    pub revision: u64,
    pub snapshots: u64,
    pub deltas: u64,
}

impl Position {
    /// Applies one event the way a node does (position only). Returns the
    /// revision a delta or completed snapshot moved to.
    pub fn apply(&mut self, event: WatchEvent) -> Option<u64> {
        match event.event? {
            watch_event::Event::Snapshot(frame) => {
                if frame.index + 1 == frame.total {
                    self.epoch = frame.epoch;
                    self.revision = frame.revision;
                    self.snapshots += 1;
                    return Some(frame.revision);
                }
                None
            }
            watch_event::Event::Delta(delta) => {
                if delta.epoch == self.epoch && delta.prev_revision == self.revision {
                    self.revision = delta.revision;
                    self.deltas += 1;
                    return Some(delta.revision);
                }
                panic!(
                    "bench client saw a gap: at {} got {}->{}",
                    self.revision, delta.prev_revision, delta.revision
                );
            }
            watch_event::Event::Progress(_) => None,
        }
    }
}
