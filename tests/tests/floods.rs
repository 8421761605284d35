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
