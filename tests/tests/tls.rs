//! The plane on a network (issue 11): SMS and a node with certificates from
//! `sms certs`, mutual TLS on every link, and each stranger refused with a
//! sentence while nothing changes: a plaintext client, a client without a
//! certificate, a node claiming another node's id, a node calling admin
//! APIs or a node's Invocation port, a forged heartbeat, a plaintext SMS
//! on a non-loopback address. A spy node shows SMS sends no token on.

use std::process::Command;
use std::sync::Arc;

use parking_lot::Mutex;
use spear_identity::{dial, incoming, Identity, TlsIdentity};
use spear_proto::v1::invocation_server::{Invocation, InvocationServer};
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::{HeartbeatRequest, InvokeRequest, InvokeResponse, SyncState};
use spear_tests::certs::{Certs, TlsSet};
use spear_tests::procs::{bin, SmsOptions, SmsProc};
use spear_tests::runtime;
use spear_tests::tasks::{invoke_json, tls_cluster_with_task};

fn identity(set: &TlsSet) -> TlsIdentity {
    set.identity().unwrap()
}

/// A heartbeat for `node_id` sent with `as_cert`'s certificate.
async fn heartbeat(
    sms: &str,
    as_cert: &TlsSet,
    node_id: &str,
    invoke_addr: &str,
) -> Result<(), tonic::Status> {
    let tls = identity(as_cert);
    let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap();
    let channel = dialer
        .connect(endpoint)
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    NodesClient::new(channel)
        .heartbeat(HeartbeatRequest {
            node_id: node_id.into(),
            sync_state: SyncState::Synced as i32,
            invoke_addr: invoke_addr.into(),
            ..Default::default()
        })
        .await
        .map(|_| ())
}

#[test]
fn a_tls_cluster_runs_tasks_and_refuses_every_stranger() {
    let certs = Certs::new("spear.test");
    let (c, real_addr) = tls_cluster_with_task("behind mutual TLS", &certs);
    let run = invoke_json(&c, &["fs-agent"]);
    assert_eq!(run["ok"], true, "{run}");
    // Both metrics endpoints are HTTPS with the process's certificate,
    // verified with the CA; plaintext gets no metrics.
    for (endpoint, metric) in [
        (&c.sms.metrics, "sms_registry_revision"),
        (&c.node.http, "spearlet_registry_revision"),
    ] {
        assert!(endpoint.starts_with("https://"), "{endpoint}");
        let scraped = spear_tests::http::get(endpoint, "/metrics").unwrap();
        assert!(scraped.contains(metric), "{scraped}");
        let plain = spear_tests::http::get(endpoint.trim_start_matches("https://"), "/metrics");
        assert!(plain.is_err(), "{plain:?}");
    }
    let servers_before = c.sms.client(&["servers"]).1;
    // SMS has no token: one left in an admin's environment counts for
    // nothing, and the admin certificate still works.
    let (code, _, err) = c
        .sms
        .client_with_token(&["status"], Some("stray-token-0123456789"));
    assert_eq!(code, 0, "{err}");

    // A plaintext client: the handshake fails and the CLI says what to pass.
    let (code, text) = c.sms.client_as(&["status"], &[]);
    assert_ne!(code, 0);
    assert!(text.contains("pass --tls-ca"), "{text}");

    // TLS without a certificate: no role.
    let ca_only = vec!["--tls-ca".to_string(), certs.ca().display().to_string()];
    let (code, text) = c.sms.client_as(&["status"], &ca_only);
    assert_ne!(code, 0);
    assert!(
        text.contains("GetStatus refused before it was read: this port needs a client certificate"),
        "{text}"
    );
    let (code, text) = c.sms.client_as(&["servers"], &ca_only);
    assert_ne!(code, 0);
    assert!(
        text.contains(
            "ListServers refused before it was read: this port needs a client certificate"
        ),
        "{text}"
    );

    // A node's certificate calling admin APIs.
    let node_b = certs.node("node-b");
    let spec = c.work.path().join("evil.json");
    std::fs::write(
        &spec,
        r#"{"id": "evil", "transport": "stdio", "command": "/bin/sh", "args": ["-c", "id"]}"#,
    )
    .unwrap();
    let spec = spec.display().to_string();
    let (code, text) = c.sms.client_as(&["apply", &spec], &node_b.args());
    assert_ne!(code, 0);
    assert!(
        text.contains("is for admins; the caller is node/node-b"),
        "{text}"
    );
    let (code, text) = c.sms.client_as(&["invoke", "fs-agent"], &node_b.args());
    assert_ne!(code, 0);
    assert!(text.contains("is for admins"), "{text}");

    // A node's certificate calling another node's Invocation port.
    let direct = [
        "invoke",
        "fs-agent",
        "--node",
        "node-a",
        "--node-addr",
        &real_addr,
    ];
    let (code, text) = c.sms.client_as(&direct, &node_b.args());
    assert_ne!(code, 0);
    assert!(
        text.contains("invocations come from SMS or an admin; the caller is node/node-b"),
        "{text}"
    );
    // An admin may (a direct run).
    let (code, text) = c.sms.client_as(&direct, &certs.admin("ops").args());
    assert_eq!(code, 0, "{text}");

    // A forged heartbeat for node-a, from node-b's certificate.
    let rt = runtime();
    let forged = rt.block_on(heartbeat(&c.sms.grpc, &node_b, "node-a", "127.0.0.1:1"));
    let status = forged.unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("a node speaks only for itself"),
        "{status:?}"
    );
    assert_eq!(c.sms.node("node-a")["invoke_addr"], real_addr.as_str());

    // A spearlet started with node-b's certificate but node-a's id.
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin("spearlet"));
    cmd.args([
        "run",
        "--sms",
        &c.sms.grpc,
        "--node-id",
        "node-a",
        "--metrics-listen",
        "off",
    ])
    .arg("--state-dir")
    .arg(state.path())
    .args(node_b.args());
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("certificate is for node 'node-b'"), "{text}");

    // Nothing changed: the registry, node-a's address, and it still runs.
    assert_eq!(c.sms.client(&["servers"]).1, servers_before);
    let run = invoke_json(&c, &["fs-agent"]);
    assert_eq!(run["ok"], true, "{run}");
}

#[test]
fn sms_refuses_plaintext_beyond_loopback_unless_told() {
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(bin("sms"))
        .args(["serve", "--listen", "0.0.0.0:0", "--metrics-listen", "off"])
        .env_remove("SMS_INSECURE")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("without TLS") && text.contains("--insecure"),
        "{text}"
    );
    let out = Command::new(bin("spearlet"))
        .args([
            "run",
            "--sms",
            "127.0.0.1:1",
            "--listen",
            "0.0.0.0:0",
            "--metrics-listen",
            "off",
        ])
        .arg("--state-dir")
        .arg(state.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("without TLS") && text.contains("--insecure"),
        "{text}"
    );
}

/// A node that records what SMS sends it: the headers, and the request.
#[derive(Clone, Default)]
struct Spy {
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[derive(Clone, Debug)]
struct Seen {
    headers: Vec<String>,
    request: InvokeRequest,
}

#[tonic::async_trait]
impl Invocation for Spy {
    async fn invoke(
        &self,
        request: tonic::Request<InvokeRequest>,
    ) -> Result<tonic::Response<InvokeResponse>, tonic::Status> {
        let headers = request
            .metadata()
            .iter()
            .map(|kv| format!("{kv:?}"))
            .collect();
        self.seen.lock().push(Seen {
            headers,
            request: request.into_inner(),
        });
        Ok(tonic::Response::new(InvokeResponse {
            node_id: "spy".into(),
            ok: true,
            exit_code: Some(0),
            ..Default::default()
        }))
    }

    async fn explain(
        &self,
        _request: tonic::Request<spear_proto::v1::ExplainRequest>,
    ) -> Result<tonic::Response<spear_proto::v1::ExplainResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "the spy only records invocations",
        ))
    }
}

#[test]
fn sms_sends_a_node_no_token_and_only_to_the_node_its_certificate_names() {
    const TOKEN: &str = "admin-token-never-forwarded";
    let certs = Certs::new("spear.test");
    let sms = SmsProc::start(SmsOptions {
        admin_token: Some(TOKEN.into()),
        tls: Some(certs.sms()),
        client_tls: Some(certs.admin("ops")),
        ..Default::default()
    });
    let spy_cert = certs.node("spy");
    let rt = runtime();
    let spy = Spy::default();
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let tls = identity(&spy_cert);
        let service = InvocationServer::new(spy.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming(listener, Some(tls))),
        );
        heartbeat(&sms.grpc, &spy_cert, "spy", &addr).await.unwrap();
        addr
    });
    let module = sms.workdir().join("m.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let config = sms.workdir().join("t.json");
    std::fs::write(&config, "{}").unwrap();
    let (code, _, err) = sms.client_with_token(
        &[
            "tasks",
            "register",
            "--id",
            "t",
            "--module",
            &module.display().to_string(),
            "--config",
            &config.display().to_string(),
        ],
        Some(TOKEN),
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = sms.client_with_token(&["invoke", "t", "--node", "spy"], Some(TOKEN));
    assert_eq!(code, 0, "{out}{err}");
    let seen = spy.seen.lock().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let Seen { headers, request } = &seen[0];
    assert!(
        !headers
            .iter()
            .any(|h| h.contains("authorization") || h.contains(TOKEN)),
        "{headers:?}"
    );
    assert_eq!(request.task.as_ref().map(|t| t.id.as_str()), Some("t"));

    // A node whose heartbeat names someone else's address: SMS dials that
    // address expecting the named node's certificate, so the run fails
    // rather than reaching the wrong node.
    let other = certs.node("other");
    rt.block_on(heartbeat(&sms.grpc, &other, "other", &addr))
        .unwrap();
    let (code, out, err) = sms.client_with_token(&["invoke", "t", "--node", "other"], Some(TOKEN));
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("node/spy") || err.contains("not the node/other"),
        "{err}"
    );
    assert_eq!(spy.seen.lock().len(), 1);
}

/// A node started without TLS flags against a TLS SMS says, in its log and
/// its `/status`, that the connection broke before an answer and what to
/// give it, once, not a line per retry.
#[test]
fn a_plaintext_node_pointed_at_a_tls_sms_says_what_to_give_it() {
    let certs = Certs::new("spear.test");
    let (c, _) = tls_cluster_with_task("plaintext node", &certs);
    let state = tempfile::tempdir().unwrap();
    let node = spear_tests::procs::SpearletProc::start("node-b", &c.sms.grpc, state.path());
    let hint = "if SMS serves TLS, give the node --tls-ca (SMS's CA) with its certificate, or with a join token";
    let status = spear_tests::wait::eventually(
        "the node to say what to give it",
        std::time::Duration::from_secs(30),
        || {
            let status = node.status()?.to_string();
            (status.contains("failed before an answer") && status.contains(hint))
                .then_some(status.clone())
                .ok_or(status)
        },
    );
    assert!(status.contains(&c.sms.grpc), "{status}");
    let log = node.proc.log();
    assert!(
        log.contains(&format!(
            "cannot follow SMS: the connection to SMS at {}",
            c.sms.grpc
        )),
        "{log}"
    );
    assert_eq!(log.matches(hint).count(), 1, "said once: {log}");
}

/// An expired certificate is named where the user looks: a node given one
/// does not start and says when it expired and how to replace it, and so
/// does a CLI (it used to start, log nothing and show "transport error").
#[test]
fn an_expired_certificate_is_named_with_its_date_and_the_fix() {
    let certs = Certs::new("spear.test");
    let (c, _) = tls_cluster_with_task("expired certificates", &certs);
    let node = certs.expired("spiffe://spear.test/node/node-x", "node-x-expired");
    let state = tempfile::tempdir().unwrap();
    let mut run = std::process::Command::new(spear_tests::procs::bin("spearlet"));
    run.args([
        "run",
        "--sms",
        &c.sms.grpc,
        "--node-id",
        "node-x",
        "--listen",
        "127.0.0.1:0",
    ])
    .arg("--state-dir")
    .arg(state.path())
    .args(node.args());
    let out = spear_tests::procs::output_within(run, std::time::Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the node started: {err}");
    let named = format!("certificate {} expired at ", node.cert.display());
    assert!(err.contains(&named), "{err}");
    assert!(err.contains("sms certs issue"), "{err}");

    let admin = certs.expired("spiffe://spear.test/admin/ops", "admin-ops-expired");
    let mut status = std::process::Command::new(spear_tests::procs::bin("sms"));
    status
        .args(["status", "--addr", &c.sms.grpc])
        .args(admin.args());
    let out = spear_tests::procs::output_within(status, std::time::Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("certificate {} expired at ", admin.cert.display())),
        "{err}"
    );
}

/// docs/security.md's "Names for HTTPS clients", followed as written: a
/// node certificate issued with the names it is reached at lets curl verify
/// the node's HTTPS endpoint with the CA alone; one without (the test
/// cluster's, as a join token's would be) does not.
#[test]
fn curl_verifies_a_node_issued_with_the_docs_names_and_not_one_without() {
    let docs = std::fs::read_to_string(spear_tests::tasks::repo_file("docs/security.md")).unwrap();
    let issue = docs
        .lines()
        .find(|l| l.starts_with("sms certs issue /etc/spear/ca --node node-17 --dns"))
        .expect("docs/security.md shows how to issue a node certificate with names");
    let certs = Certs::new("spear.test");
    let ca_dir = certs.dir.display().to_string();
    let args: Vec<&str> = issue
        .split_whitespace()
        .skip(2)
        .map(|a| {
            if a == "/etc/spear/ca" {
                ca_dir.as_str()
            } else {
                a
            }
        })
        .collect();
    spear_tests::certs::sms_certs(&args);
    let named = spear_tests::certs::TlsSet {
        ca: certs.ca(),
        cert: certs.dir.join("node-node-17.pem"),
        key: certs.dir.join("node-node-17.key"),
    };
    let (c, _) = tls_cluster_with_task("names for https clients", &certs);
    let state = tempfile::tempdir().unwrap();
    let node = spear_tests::procs::SpearletProc::start_with(
        "node-17",
        &c.sms.grpc,
        state.path(),
        &named.args(),
    );
    let curl = |http: &str| {
        let port = http.rsplit(':').next().unwrap().to_string();
        let out = std::process::Command::new("curl")
            .args(["--silent", "--show-error", "--cacert"])
            .arg(certs.ca())
            .args(["--resolve", &format!("node-17.internal:{port}:127.0.0.1")])
            .arg(format!("https://node-17.internal:{port}/livez"))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = curl(&node.http);
    assert_eq!(code, Some(0), "{err}");
    // node-a's certificate names only its SPIFFE identity.
    let (code, err) = curl(&c.node.http);
    assert_eq!(code, Some(60), "curl cannot verify it: {err}");
}
