//! Bench watch clients: real tonic clients reading real streams.

use std::time::Duration;

use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{watch_event, WatchEvent, WatchRequest};
use tonic::transport::{Channel, Endpoint};
use tonic::Streaming;

/// A new HTTP/2 connection to SMS.
pub async fn connect(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap_or_else(|e| panic!("{e}"))
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

/// Opens a watch from `(epoch, revision)`.
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
