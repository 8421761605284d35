//! Servers scoped to nodes (issue 25): a server file's `nodes` names the
//! nodes it is for; another node keeps it disabled and without its
//! environment, and SMS refuses that node an OAuth access token for it —
//! the node id being the one its certificate names, a stolen certificate of
//! another node gets nothing of it. A scoped server with a literal secret
//! is refused when loaded.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_identity::{dial, Identity};
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::AccessTokenRequest;
use spear_tests::certs::{Certs, TlsSet};
use spear_tests::procs::{bin, SpearletProc};
use spear_tests::runtime;
use spear_tests::tasks::tls_cluster_with_task;
use spear_tests::wait::eventually;

/// The server `id` in a node's registry, once it has it.
fn listed(node: &SpearletProc, id: &str) -> Value {
    eventually(
        "the node to have the server",
        Duration::from_secs(30),
        || {
            let registry = node.registry()?;
            let found = registry["servers"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["id"] == id || s["spec"]["id"] == id)
                .cloned();
            found.ok_or(registry.to_string())
        },
    )
}

async fn token_as(sms: &str, cert: &TlsSet, server: &str) -> tonic::Status {
    let tls = cert.identity().unwrap();
    let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap();
    let channel = dialer.connect(endpoint).await.unwrap();
    CredentialsClient::new(channel)
        .get_access_token(AccessTokenRequest {
            server_id: server.into(),
            ..Default::default()
        })
        .await
        .unwrap_err()
}

#[test]
fn a_server_for_one_node_is_nothing_to_another() {
    let certs = Certs::new("spear.test");
    let (c, _) = tls_cluster_with_task("scope", &certs);
    let node_b_cert = certs.node("node-b");
    let state = tempfile::tempdir().unwrap();
    let node_b = SpearletProc::start_with(
        "node-b",
        &c.sms.grpc,
        &state.path().join("node-b"),
        &node_b_cert.args(),
    );
    std::fs::write(
        c.work.path().join("mcp.d").join("only-a.json"),
        json!({"id": "only-a", "command": "/bin/true", "nodes": ["node-a"],
               "env": {"ONLY_A_TOKEN": "${ONLY_A_TOKEN}"}})
        .to_string(),
    )
    .unwrap();

    let on_a = listed(&c.node, "only-a").to_string();
    let on_b = listed(&node_b, "only-a").to_string();
    assert!(on_a.contains("ONLY_A_TOKEN"), "{on_a}");
    assert!(
        !on_b.contains("ONLY_A_TOKEN"),
        "node-b keeps no env of it: {on_b}"
    );
    assert!(on_b.contains("\"enabled\":false"), "{on_b}");

    // SMS: no token for node-b; node-a is past the scope check (and told
    // the server is not behind OAuth).
    let rt = runtime();
    let refused = rt.block_on(token_as(&c.sms.grpc, &node_b_cert, "only-a"));
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("server 'only-a' is not for node 'node-b'"),
        "{refused:?}"
    );
    let node_a_cert = TlsSet {
        ca: certs.ca(),
        cert: certs.dir.join("node-node-a.pem"),
        key: certs.dir.join("node-node-a.key"),
    };
    let past = rt.block_on(token_as(&c.sms.grpc, &node_a_cert, "only-a"));
    assert_ne!(past.code(), tonic::Code::PermissionDenied, "{past:?}");

    // A scoped server with a literal secret is refused when loaded.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("leaky.json"),
        json!({"id": "leaky", "command": "x", "nodes": ["node-a"],
               "env": {"API_KEY": "sk-live-not-for-everyone"}})
        .to_string(),
    )
    .unwrap();
    let out = Command::new(bin("sms"))
        .arg("validate")
        .arg(dir.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("$.env.API_KEY: is a literal value, and the server is scoped"),
        "{text}"
    );
    assert!(!text.contains("sk-live-not-for-everyone"), "{text}");
}
