//! Handshake admission when a fleet comes back at once: many hosts, one
//! connection each, more than the port has slots for. Every one must get
//! in on its first connection, none dropped for a newer one (dropping
//! them made each node back off and come back to be dropped again, and a
//! fleet of 10,000 took 30 s to return). And a flood from few addresses
//! must still make room for a newcomer: its own connections go.
//!
//! The port is `spear_identity::incoming_within`, the one SMS and nodes
//! serve on, with small bounds so a few dozen clients fill it; the clients
//! are real mutual-TLS gRPC connections, each from its own loopback
//! address, as in the fleet benchmark.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use spear_identity::{dial, dropped_for_newer, Bounds, Identity, Protocol, TlsIdentity};
use spear_tests::certs::Certs;
use spear_tests::runtime;
use tokio::io::AsyncWriteExt;

/// The drop counters are the process's: one test at a time reads them.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Eight handshakes and sixteen waiting connections for sixty hosts.
fn small() -> Bounds {
    Bounds {
        silent: 16,
        silent_per_source: 4,
        handshakes: 8,
        handshakes_per_source: 2,
        ..Bounds::default()
    }
}

const HOSTS: usize = 60;

fn host(k: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 3, 0, k as u8 + 1))
}

/// A port serving gRPC health on `incoming_within` with `bounds`.
async fn port(sms: TlsIdentity, bounds: Bounds) -> SocketAddr {
    let listener = spear_identity::listen("127.0.0.1:0".parse().expect("address"))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local address");
    let conns = spear_identity::incoming_within(listener, Some(sms), bounds, Protocol::Grpc);
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(
        spear_identity::server()
            .add_service(health)
            .serve_with_incoming(conns),
    );
    addr
}

/// One host's first connection and one call on it; the error if either
/// failed (no retry: a drop shows as a failure).
async fn first_call(addr: SocketAddr, node: TlsIdentity, from: IpAddr) -> Result<(), String> {
    let (endpoint, dialer) =
        dial(&addr.to_string(), Some(&node), Identity::Sms).map_err(|e| e.to_string())?;
    let endpoint = endpoint.connect_timeout(Duration::from_secs(60));
    let channel = dialer
        .from_address(from)
        .connect(endpoint)
        .await
        .map_err(|e| format!("{from}: connect: {e:?}"))?;
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .map_err(|e| format!("{from}: call: {e}"))?;
    Ok(())
}

/// Runs `test` against a port with `bounds` and a node's identity, one
/// test at a time.
fn on_a_port<F: std::future::Future<Output = ()>>(
    bounds: Bounds,
    test: impl FnOnce(SocketAddr, TlsIdentity) -> F,
) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let certs = Certs::new("spear.test");
    runtime().block_on(async {
        let sms = certs.sms().identity().expect("sms identity");
        let node = certs.node("n1").identity().expect("node identity");
        let addr = port(sms, bounds).await;
        test(addr, node).await;
    });
}

#[test]
fn a_fleet_coming_back_at_once_gets_in_on_its_first_connections() {
    on_a_port(small(), |addr, node| async move {
        let before = dropped_for_newer();
        let calls: Vec<_> = (0..HOSTS)
            .map(|k| tokio::spawn(first_call(addr, node.clone(), host(k))))
            .collect();
        let mut failed = Vec::new();
        for call in calls {
            if let Err(e) = call.await.expect("client task") {
                failed.push(e);
            }
        }
        assert!(
            failed.is_empty(),
            "{} of {HOSTS} hosts lost their first connection: {failed:?}",
            failed.len()
        );
        assert_eq!(
            dropped_for_newer(),
            before,
            "connections were dropped for newer ones (silent, speaking)"
        );
    });
}

/// The rule that keeps a flood from locking a newcomer out: at the port's
/// bound, the source holding the most loses its oldest, so a host that
/// comes after it is admitted and served at once.
#[test]
fn a_flood_from_one_address_makes_room_for_a_newcomer() {
    let bounds = Bounds {
        silent: 16,
        silent_per_source: 64,
        ..small()
    };
    on_a_port(bounds, |addr, node| async move {
        // Sixteen silent connections from one address: every slot of the
        // table is the flooder's.
        let flooder = host(200);
        let mut held = Vec::new();
        for _ in 0..16 {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.bind(SocketAddr::new(flooder, 0)).expect("bind");
            let mut tcp = socket.connect(addr).await.expect("connect");
            tcp.flush().await.expect("flush");
            held.push(tcp);
        }
        let (silent_before, _) = dropped_for_newer();
        let result = first_call(addr, node, host(201)).await;
        assert_eq!(result, Ok(()), "the newcomer was locked out by a flood");
        // Let in by dropping one of the flood (not by waiting for a
        // flooder's deadline, which is no drop).
        let (silent_after, _) = dropped_for_newer();
        assert_eq!(silent_after - silent_before, 1, "the flood made no room");
    });
}
