//! One bench node of the fleet, as a node is to SMS: its own certificate and loopback address,
//! one connection with a node's keepalive, a follow stream that reports what it applied, and
//! (for the comparison) the heartbeat calls nodes made before the follow stream.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use spear_identity::{dial, Identity, TlsIdentity};
use spear_proto::defaults::HEARTBEAT_EVERY;
use spear_proto::v1::follow_request::Message;
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{FollowRequest, HeartbeatRequest, WatchRequest};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::bench_support::clients::Position;
use crate::bench_support::tls::BenchCerts;

/// What every bench node shares with the measuring task.
pub(super) struct Fleet {
    /// Each replica's address; node `k` follows replica `k % len`.
    pub(super) sms: Vec<String>,
    pub(super) certs: BenchCerts,
    /// Where each node's stream stands.
    pub(super) positions: Vec<(AtomicU64, AtomicU64)>,
    /// How many times each node's watch was accepted.
    pub(super) watches: Vec<AtomicU64>,
    pub(super) beating: AtomicBool,
    /// Connection attempts that failed (refused, timed out, or a
    /// handshake SMS dropped) and follow calls refused on a connection.
    pub(super) failed_connects: AtomicU64,
    pub(super) failed_follows: AtomicU64,
    /// Each applied delta's revision and when it arrived.
    pub(super) arrivals: mpsc::UnboundedSender<(u64, Instant)>,
}

/// Node `k`'s own loopback address.
fn address_of(k: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 1, (k / 250) as u8, (k % 250 + 1) as u8))
}

/// A connection as a node's `SmsLink` makes it (the same timeout and
/// keepalive).
async fn connect(
    sms: &str,
    tls: &TlsIdentity,
    from: IpAddr,
) -> Result<Channel, tonic::transport::Error> {
    let (endpoint, dialer) = dial(sms, Some(tls), Identity::Sms).unwrap_or_else(|e| panic!("{e}"));
    let endpoint = endpoint
        .connect_timeout(spearlet::sms_link::CONNECT_TIMEOUT)
        .http2_keep_alive_interval(spearlet::sms_link::PING_AFTER)
        .keep_alive_timeout(spearlet::sms_link::PING_ANSWER_WITHIN);
    dialer.from_address(from).connect(endpoint).await
}

/// Node `k`'s report at `position`, as a real node's carries it.
fn report_of(k: usize, position: &Position) -> HeartbeatRequest {
    HeartbeatRequest {
        node_id: format!("bench-{k}"),
        version: "bench".into(),
        // As a real node's: an invocable node is shared with the other
        // replicas through etcd.
        invoke_addr: format!("{}:7000", address_of(k)),
        applied_epoch: position.epoch,
        applied_revision: position.revision,
        sync_state: spear_proto::v1::SyncState::Synced as i32,
        ..Default::default()
    }
}

/// One bench node: connect, follow from where it is, apply and report
/// what it applied; heartbeat calls on the same connection while the
/// fleet beats (the comparison); after any end, the node's own wait
/// (`Retry`), then again.
pub(super) async fn node(fleet: Arc<Fleet>, k: usize) {
    let mut retry = spearlet::sync::Retry::default();
    let mut position = Position::default();
    (position.epoch, position.revision) = (
        fleet.positions[k].0.load(Ordering::Relaxed),
        fleet.positions[k].1.load(Ordering::Relaxed),
    );
    loop {
        let mut refused = false;
        match connect(
            &fleet.sms[k % fleet.sms.len()],
            fleet.certs.node(k),
            address_of(k),
        )
        .await
        {
            Err(e) => {
                refused = spearlet::sms_link::nobody_listening(&e);
                fleet.failed_connects.fetch_add(1, Ordering::Relaxed);
            }
            Ok(channel) => {
                let beats = tokio::spawn(heartbeats(Arc::clone(&fleet), k, channel.clone()));
                let (report, reports) = tokio::sync::watch::channel(report_of(k, &position));
                let first = FollowRequest {
                    message: Some(Message::Watch(WatchRequest {
                        node_id: format!("bench-{k}"),
                        epoch: position.epoch,
                        revision: position.revision,
                    })),
                };
                let outbound = futures::stream::once(async { first }).chain(
                    tokio_stream::wrappers::WatchStream::new(reports).map(|r| FollowRequest {
                        message: Some(Message::Report(r)),
                    }),
                );
                let mut registry = RegistryClient::new(channel).max_decoding_message_size(64 << 20);
                if let Ok(response) = registry.follow(outbound).await {
                    fleet.watches[k].fetch_add(1, Ordering::Relaxed);
                    retry.reset();
                    let mut stream = response.into_inner();
                    while let Some(Ok(event)) = stream.next().await {
                        if let Some(revision) = position.apply(event) {
                            let _ = fleet.arrivals.send((revision, Instant::now()));
                            fleet.positions[k]
                                .0
                                .store(position.epoch, Ordering::Relaxed);
                            fleet.positions[k]
                                .1
                                .store(position.revision, Ordering::Relaxed);
                            report.send_replace(report_of(k, &position));
                        }
                    }
                } else {
                    fleet.failed_follows.fetch_add(1, Ordering::Relaxed);
                }
                beats.abort();
            }
        }
        tokio::time::sleep(retry.next_delay(refused)).await;
    }
}

/// A node's heartbeat calls, every HEARTBEAT_EVERY from a random start,
/// while the fleet beats: how nodes reported before the follow stream.
async fn heartbeats(fleet: Arc<Fleet>, k: usize, channel: Channel) {
    let mut nodes = NodesClient::new(channel);
    let offset = HEARTBEAT_EVERY.mul_f64(rand::random::<f64>());
    tokio::time::sleep(offset).await;
    loop {
        if fleet.beating.load(Ordering::Relaxed) {
            let request = HeartbeatRequest {
                node_id: format!("bench-{k}"),
                version: "bench".into(),
                // As a real node's: an invocable node is shared with the
                // other replicas through etcd.
                invoke_addr: format!("{}:7000", address_of(k)),
                applied_epoch: fleet.positions[k].0.load(Ordering::Relaxed),
                applied_revision: fleet.positions[k].1.load(Ordering::Relaxed),
                ..Default::default()
            };
            let _ = nodes.heartbeat(request).await;
        }
        tokio::time::sleep(HEARTBEAT_EVERY).await;
    }
}
