//! Servers scoped to nodes (issue 25): a server file's `nodes` names the
//! nodes it is for; another node keeps it disabled and without its
//! environment, and SMS refuses that node an OAuth access token for it —
//! the node id being the one its certificate names, a stolen certificate of
//! another node gets nothing of it. A literal secret in a server file is
//! sealed by SMS: it is in no registry, list, state or log, and SMS opens it
//! only for the nodes the server is for, whose server process gets it.

use std::time::Duration;

use serde_json::{json, Value};
use spear_identity::{dial, Identity};
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{AccessTokenRequest, ListServersRequest, OpenSealedRequest, SealedValue};
use spear_tests::certs::{Certs, TlsSet};
use spear_tests::peers::npm_bin;
use spear_tests::procs::SpearletProc;
use spear_tests::runtime;
use spear_tests::tasks::{guest, register, tls_cluster_with_task};
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
    assert!(
        on_a.contains("ONLY_A_TOKEN") && on_a.contains("/bin/true"),
        "{on_a}"
    );
    // node-b receives its id and scope only: nothing of how to run it.
    assert!(
        !on_b.contains("ONLY_A_TOKEN") && !on_b.contains("/bin/true"),
        "node-b keeps nothing of it: {on_b}"
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

    // A literal secret in a server file never travels in the registry:
    // SMS seals it, and opens it for the nodes the server is for only.
    const SECRET: &str = "sk-live-sealed-0123456789";
    std::fs::write(
        c.work.path().join("mcp.d").join("vault.json"),
        json!({"id": "fs-rw", "command": npm_bin("mcp-server-everything"),
               "nodes": ["node-a"], "env": {"API_KEY": SECRET}})
        .to_string(),
    )
    .unwrap();
    let on_a = listed(&c.node, "fs-rw").to_string();
    assert!(on_a.contains("env.API_KEY"), "listed as sealed: {on_a}");
    listed(&node_b, "fs-rw");
    let (code, servers, err) = c.sms.client(&["servers", "--json"]);
    assert_eq!(code, 0, "{err}");
    let sealed: Vec<SealedValue> = {
        let rt = runtime();
        rt.block_on(sealed_values(&c.sms.grpc, &certs, "fs-rw"))
    };
    assert_eq!(sealed.len(), 1);

    // node-b may not open it; node-a may, and only its current value.
    let rt = runtime();
    let refused = rt
        .block_on(open_as(&c.sms.grpc, &node_b_cert, "fs-rw", sealed.clone()))
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let opened = rt
        .block_on(open_as(&c.sms.grpc, &node_a_cert, "fs-rw", sealed.clone()))
        .unwrap();
    assert_eq!(opened, [SECRET]);
    let mut forged = sealed.clone();
    forged[0].name = "OTHER".into();
    let stale = rt
        .block_on(open_as(&c.sms.grpc, &node_a_cert, "fs-rw", forged))
        .unwrap_err();
    assert_eq!(stale.code(), tonic::Code::FailedPrecondition, "{stale:?}");

    // node-a runs the server with the value: a session that offers its
    // tools (the approval agent's "fs-rw") connects it.
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs-rw"]},
                      "limits": {"wall_ms": 30000}});
    let (code, _, err) = register(&c, "vault-agent", &guest("approval-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    let _ = c.sms.client(&[
        "invoke",
        "vault-agent",
        "--node",
        "node-a",
        "--input",
        "hello",
    ]);
    let holders = eventually(
        "the server to run with its value",
        Duration::from_secs(60),
        || {
            let found = processes_with_env(&format!("API_KEY={SECRET}"));
            (!found.is_empty())
                .then_some(found)
                .ok_or("no process has it yet".to_string())
        },
    );
    assert_eq!(holders.len(), 1, "one server process: {holders:?}");

    // node-b never had even its command (sent as a change), nor does a
    // node that joins later (sent a snapshot).
    let everything = npm_bin("mcp-server-everything").display().to_string();
    assert!(files_text(&c.node.state_dir).contains(&everything));
    let node_c = SpearletProc::start_with(
        "node-c",
        &c.sms.grpc,
        &state.path().join("node-c"),
        &certs.node("node-c").args(),
    );
    listed(&node_c, "fs-rw");
    for node in [&node_b, &node_c] {
        assert!(!files_text(&node.state_dir).contains(&everything));
        assert!(!node.registry().unwrap().to_string().contains(&everything));
    }

    // And nowhere else: not in what SMS lists, not in either node's state
    // or log, not in SMS's log.
    assert!(!servers.contains(SECRET), "{servers}");
    for (what, text) in [
        ("node-a's state", files_text(&c.node.state_dir)),
        ("node-b's state", files_text(&node_b.state_dir)),
        ("node-a's log", c.node.proc.log()),
        ("node-b's log", node_b.proc.log()),
        ("SMS's log", c.sms.proc.log()),
    ] {
        assert!(!text.contains(SECRET), "{what} holds the sealed value");
    }
}

/// The sealed values of `server` in SMS's registry, as an admin lists them.
async fn sealed_values(sms: &str, certs: &Certs, server: &str) -> Vec<SealedValue> {
    let tls = certs.admin("ops").identity().unwrap();
    let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap();
    let listed = RegistryClient::new(dialer.connect(endpoint).await.unwrap())
        .list_servers(ListServersRequest {})
        .await
        .unwrap()
        .into_inner();
    listed
        .servers
        .into_iter()
        .filter_map(|r| r.spec)
        .find(|s| s.id == server)
        .map(|s| s.sealed)
        .unwrap_or_default()
}

async fn open_as(
    sms: &str,
    cert: &TlsSet,
    server: &str,
    values: Vec<SealedValue>,
) -> Result<Vec<String>, tonic::Status> {
    let tls = cert.identity().unwrap();
    let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap();
    let channel = dialer.connect(endpoint).await.unwrap();
    CredentialsClient::new(channel)
        .open_sealed(OpenSealedRequest {
            server_id: server.into(),
            values,
        })
        .await
        .map(|r| r.into_inner().values)
}

/// The pids of processes whose environment holds `entry` (`NAME=value`).
fn processes_with_env(entry: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
        })
        .collect()
}

/// Every file under `dir`, as text, end to end.
fn files_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.filter_map(Result::ok).map(|e| e.path()));
            }
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    out
}
