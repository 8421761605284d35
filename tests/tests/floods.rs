//! Cheap floods against the TLS plane (issue 25), on the real binaries:
//! silent TCP connections must not lock an admin out, and a large request
//! from a caller without a credential is refused from its headers, before
//! its body is read, at SMS and at a node's Invocation port. The memory and
//! latency figures under a flood are a benchmark (`--bench floods`); here
//! each behaviour is asserted by what a user sees.

use std::net::TcpStream;

use spear_identity::{dial, Identity, TlsFlags};
use spear_proto::v1::admin_client::AdminClient;
use spear_proto::v1::invocation_client::InvocationClient;
use spear_proto::v1::{InvokeRequest, UpsertServerRequest};
use spear_tests::certs::Certs;
use spear_tests::runtime;
use spear_tests::tasks::tls_cluster_with_task;

/// More silent connections than SMS used to have handshake slots (512).
const SILENT: usize = 600;
/// Far above every limit a service decodes (Admin: 2 MiB).
const BIG: usize = 30 * 1024 * 1024;

fn silent_connections(addr: &str) -> Vec<TcpStream> {
    (0..SILENT)
        .map(|i| TcpStream::connect(addr).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect()
}

#[test]
fn silent_connections_and_big_anonymous_requests_lock_nobody_out() {
    let certs = Certs::new("spear.test");
    let (c, node_addr) = tls_cluster_with_task("floods", &certs);

    // Silent TCP connections to both ports, held for the whole test: they
    // never start a handshake. The admin still gets an answer.
    let _held_sms = silent_connections(&c.sms.grpc);
    let _held_node = silent_connections(&node_addr);
    let (code, out, err) = c.sms.client(&["status"]);
    assert_eq!(
        code, 0,
        "an admin is locked out by silent connections: {err}"
    );
    assert!(out.contains("node-a"), "{out}");

    // TLS without a client certificate: a 30 MiB request is answered
    // "unauthenticated" from its headers. Had SMS read the body, the answer
    // would be that the message is too large for the Admin service.
    let rt = runtime();
    let anonymous = TlsFlags {
        ca: Some(certs.ca()),
        cert: None,
        key: None,
    };
    let (sms_status, node_status) = rt.block_on(async {
        let tls = anonymous.client().unwrap();
        let (endpoint, dialer) = dial(&c.sms.grpc, tls.as_ref(), Identity::Sms).unwrap();
        let mut admin = AdminClient::new(dialer.connect(endpoint).await.unwrap())
            .max_encoding_message_size(usize::MAX);
        let big_spec = format!(r#"{{"id": "big", "description": "{}"}}"#, "x".repeat(BIG));
        let sms_status = admin
            .upsert_server(UpsertServerRequest {
                spec_json: big_spec,
            })
            .await
            .unwrap_err();

        let (endpoint, dialer) =
            dial(&node_addr, tls.as_ref(), Identity::Node("node-a".into())).unwrap();
        let mut node = InvocationClient::new(dialer.connect(endpoint).await.unwrap())
            .max_encoding_message_size(usize::MAX);
        let node_status = node
            .invoke(InvokeRequest {
                input: vec![b'x'; BIG].into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        (sms_status, node_status)
    });
    for (who, status) in [("SMS", &sms_status), ("the node", &node_status)] {
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{who}: {status:?}"
        );
        assert!(
            status.message().contains("refused before it was read")
                && status.message().contains("client certificate"),
            "{who}: {status:?}"
        );
    }

    // Nothing changed, and the plane still works with the flood held.
    let (code, out, err) = c.sms.client(&["servers"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("big"), "{out}");
}

/// Silent connections within a source's bound (256) are left to their
/// handshake deadline (5 s), not dropped: every drop is an accept and a
/// task more, as the flooder reopens at once. Past the bound, the oldest
/// go. (When this machine stalls past the deadline itself, every one of
/// them may have gone, and nothing can be said.)
#[test]
fn silent_connections_are_dropped_only_past_their_sources_bound() {
    let certs = Certs::new("spear.test");
    let sms = spear_tests::procs::SmsProc::start(spear_tests::procs::SmsOptions {
        tls: Some(certs.sms()),
        client_tls: Some(certs.admin("ops")),
        ..Default::default()
    });
    let started = std::time::Instant::now();
    let addr: std::net::SocketAddr = sms.grpc.parse().unwrap();
    let rt = runtime();
    let held: Vec<TcpStream> = rt.block_on(async {
        let mut held = Vec::new();
        for _ in 0..300 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            held.push(socket.connect(addr).await.unwrap().into_std().unwrap());
        }
        held
    });
    let closed = || held.iter().filter(|tcp| !silent_and_open(tcp)).count();
    let seen = spear_tests::wait::eventually(
        "SMS to drop the connections past the bound",
        std::time::Duration::from_secs(30),
        || match closed() {
            n if n >= 44 => Ok(n),
            n => Err(format!("{n} closed")),
        },
    );
    if started.elapsed() < std::time::Duration::from_secs(4) {
        assert_eq!(seen, 44, "only the 44 past the bound of 256 are dropped");
    }
}

/// Whether `tcp` (non-blocking) is still open with nothing to read.
fn silent_and_open(tcp: &TcpStream) -> bool {
    matches!(tcp.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}
