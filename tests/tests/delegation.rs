//! Whose token is it: a server that acts per person (`"grant":
//! "token_exchange"`) behind a real authorization server (oidc-provider,
//! `peers/delegating_as.mjs`, with RFC 8693 token exchange and the RFC 7523
//! JWT bearer grant registered) that is also where people sign in. People
//! invoke one task on two nodes over mutual TLS; every call the MCP server
//! (`peers/delegated_server.py`, which introspects each token) serves
//! carries that person's own token with the node that ran it as actor; a
//! run nobody invoked uses the node's workload identity; a person who never
//! connected their account, or whose grant was revoked, gets the sentence
//! and nobody else's token; every record names principal and actor; no
//! token shows in a log, in status or to the model.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_identity::{dial, Identity};
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::{AccessTokenRequest, AccessTokenResponse};
use spear_sms::oauth::per_principal::Delegation;
use spear_sms::seal::SealingKey;
use spear_tests::certs::Certs;
use spear_tests::peers::{node22, npm_dir, peer_file, python_sdk, sign_in, HttpPeer};
use spear_tests::procs::{bin, Proc, SmsOptions, SmsProc, SpearletProc};
use spear_tests::tasks::{calling_once, guest, register_at, replay_model_on, wait_invocable};
use spear_tests::wait::{eventually, free_port};

const CLIENT_SECRET: &str = "sms-client-s3cret-4b1e90";

struct Setup {
    issuer: String,
    sms: SmsProc,
    nodes: Vec<SpearletProc>,
    certs: Certs,
    provider: Proc,
    calls: PathBuf,
    model: Proc,
    /// A second authorization server, named by a hostile MCP server.
    rogue: Proc,
    rogue_calls: PathBuf,
    /// SMS's sealing key (`--oauth-key-file`): what a node copying another
    /// node's delegation would hold, sealed by SMS itself.
    key: SealingKey,
    _server: HttpPeer,
    _peers: Vec<Box<dyn std::any::Any>>,
    _work: tempfile::TempDir,
}

/// The authorization server, once it listens: its process and issuer.
fn authorization_server(work: &Path, name: &str, sms_issuer: &str, ca: &Path) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(node22());
    cmd.arg(peer_file("delegating_as.mjs"))
        .arg(npm_dir())
        .arg(port.to_string())
        .arg(sms_issuer)
        .arg(CLIENT_SECRET)
        // It fetches SMS's workload keys over SMS's TLS.
        .env("NODE_EXTRA_CA_CERTS", ca);
    let proc = Proc::spawn(name, cmd, work.join(format!("{name}.log")));
    eventually(
        "the authorization server to listen",
        Duration::from_secs(30),
        || {
            let log = proc.log();
            log.contains("READY").then_some(()).ok_or(log)
        },
    );
    (proc, format!("http://127.0.0.1:{port}"))
}

impl Setup {
    fn start() -> Setup {
        let work = tempfile::tempdir().unwrap();
        let certs = Certs::new("spear.test");
        let metrics_port = free_port();
        let sms_issuer = format!("https://127.0.0.1:{metrics_port}");
        let (provider, issuer) = authorization_server(work.path(), "as", &sms_issuer, &certs.ca());
        let calls = work.path().join("calls.txt");
        let server = HttpPeer::start_on_a_free_port("server acting per person", |port| {
            let mut cmd = Command::new(python_sdk());
            cmd.arg(peer_file("delegated_server.py"))
                .arg(port.to_string())
                .arg(&issuer)
                .arg(&calls);
            cmd
        });
        let mcp_dir = work.path().join("mcp.d");
        std::fs::create_dir_all(&mcp_dir).unwrap();
        let file = json!({"mcpServers": {"people": {
            "url": format!("http://127.0.0.1:{}/mcp", server.port),
            "auth": {"grant": "token_exchange", "client_id": "spear-sms",
                     "client_secret": "${SPEAR_TEST_SMS_CLIENT_SECRET}"},
        }}});
        std::fs::write(mcp_dir.join("people.json"), file.to_string()).unwrap();
        // A hostile server: it names an authorization server of its own.
        let (rogue, rogue_issuer) =
            authorization_server(work.path(), "rogue-as", &sms_issuer, &certs.ca());
        let rogue_calls = work.path().join("rogue-calls.txt");
        let rogue_server = HttpPeer::start_on_a_free_port("hostile server", |port| {
            let mut cmd = Command::new(python_sdk());
            cmd.arg(peer_file("delegated_server.py"))
                .arg(port.to_string())
                .arg(&rogue_issuer)
                .arg(&rogue_calls);
            cmd
        });
        let file = json!({"mcpServers": {"rogue": {
            "url": format!("http://127.0.0.1:{}/mcp", rogue_server.port),
            "auth": {"grant": "token_exchange", "client_id": "spear-sms",
                     "client_secret": "${SPEAR_TEST_SMS_CLIENT_SECRET}"},
        }}});
        std::fs::write(mcp_dir.join("rogue.json"), file.to_string()).unwrap();
        std::env::set_var("SPEAR_TEST_SMS_CLIENT_SECRET", CLIENT_SECRET);
        let key_file = work.path().join("oauth.key");
        let key = SealingKey::generate(&key_file).unwrap();
        let sms = SmsProc::start(SmsOptions {
            mcp_dir: Some(mcp_dir),
            tls: Some(certs.sms_at(&["127.0.0.1".parse().unwrap()])),
            client_tls: Some(certs.admin("ops")),
            metrics_port: Some(metrics_port),
            extra: vec![
                "--oidc-issuer".into(),
                issuer.clone(),
                "--oidc-audience".into(),
                "spear-people".into(),
                "--workload-issuer".into(),
                sms_issuer,
                "--oauth-key-file".into(),
                key_file.display().to_string(),
            ],
            ..Default::default()
        });
        let files = work.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        let (model, url) = replay_model_on(
            work.path(),
            "model",
            &calling_once(work.path(), "people", "whoami"),
            &files,
            "127.0.0.1:0",
        );
        let rogue_dir = work.path().join("rogue");
        std::fs::create_dir_all(&rogue_dir).unwrap();
        let (rogue_model, rogue_url) = replay_model_on(
            &rogue_dir,
            "rogue-model",
            &calling_once(&rogue_dir, "rogue", "whoami"),
            &files,
            "127.0.0.1:0",
        );
        let config = work.path().join("node.toml");
        std::fs::write(
            &config,
            format!(
                "[llm]\ndefault = \"replay\"\n\n[llm.backends.replay]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"recorded\"\n\n[llm.backends.rogue]\nkind = \"openai\"\nbase_url = \"{rogue_url}\"\nmodel = \"recorded\"\n\n[policy]\nmodules = [\"file://{}/\"]\negress = [\"127.0.0.0/8\"]\n",
                guest("task-agent").parent().unwrap().display()
            ),
        )
        .unwrap();
        let nodes: Vec<SpearletProc> = ["node-a", "node-b"]
            .iter()
            .map(|id| {
                let mut args = vec!["--config".to_string(), config.display().to_string()];
                args.extend(certs.node(id).args());
                SpearletProc::start_with(id, &sms.grpc, &work.path().join(id), &args)
            })
            .collect();
        wait_invocable(&sms, 2);
        let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["people"], "default_server_ids": ["people"]},
                          "invokers": ["subject:alice", "subject:bob", "subject:carol"],
                          "limits": {"wall_ms": 60000}});
        let (code, _, err) =
            register_at(&sms, work.path(), "notes", &guest("task-agent"), &task, &[]);
        assert_eq!(code, 0, "{err}");
        let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["rogue"], "default_server_ids": ["rogue"]},
                          "llm": {"backend": "rogue"}, "invokers": ["subject:alice"],
                          "limits": {"wall_ms": 60000}});
        let (code, _, err) =
            register_at(&sms, work.path(), "rogue", &guest("task-agent"), &task, &[]);
        assert_eq!(code, 0, "{err}");
        Setup {
            issuer,
            sms,
            nodes,
            certs,
            provider,
            calls,
            model,
            rogue,
            rogue_calls,
            key,
            _server: server,
            _peers: vec![Box::new(rogue_server), Box::new(rogue_model)],
            _work: work,
        }
    }

    /// `user` signs in: their ID token.
    fn sign_in(&self, user: &str) -> String {
        sign_in(&self.issuer, user, &[])
    }

    /// The person with `token` invokes task notes on `node`: the run's JSON.
    fn invoke_as(&self, token: &str, node: &str) -> Value {
        self.invoke_task_as("notes", token, node)
    }

    /// [`Setup::invoke_as`] for `task`.
    fn invoke_task_as(&self, task: &str, token: &str, node: &str) -> Value {
        let out = Command::new(bin("sms"))
            .args(["invoke", "--json", task, "--node", node])
            .args(["--principal-token", "${ID_TOKEN}", "--addr", &self.sms.grpc])
            .arg("--tls-ca")
            .arg(self.certs.ca())
            .env("ID_TOKEN", token)
            .env_remove("SMS_ADMIN_TOKEN")
            .env_remove("SPEAR_TLS_CERT")
            .env_remove("SPEAR_TLS_KEY")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(&self.calls).unwrap_or_default()
    }
}

fn said(run: &Value) -> String {
    run["stdout"].as_str().unwrap_or_default().to_string()
}

#[test]
fn each_person_s_calls_carry_their_own_token_with_the_node_as_actor() {
    let s = Setup::start();
    let (alice, bob, carol) = (s.sign_in("alice"), s.sign_in("bob"), s.sign_in("carol"));

    // Two people, two nodes, and both people on one node: each call is the
    // person's own, and names the node that made it.
    let alice_a = s.invoke_as(&alice, "node-a");
    assert!(
        said(&alice_a).contains("the server said: sub=alice act=spiffe://spear.test/node/node-a"),
        "{alice_a}"
    );
    let bob_b = s.invoke_as(&bob, "node-b");
    assert!(
        said(&bob_b).contains("sub=bob act=spiffe://spear.test/node/node-b"),
        "{bob_b}"
    );
    let bob_a = s.invoke_as(&bob, "node-a");
    assert!(
        said(&bob_a).contains("sub=bob act=spiffe://spear.test/node/node-a"),
        "{bob_a}"
    );

    // A run nobody invoked (an admin's) is the node's own.
    let (code, out, err) = s
        .sms
        .client(&["invoke", "--json", "notes", "--node", "node-b"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("sub=spiffe://spear.test/node/node-b act=none"),
        "{out}"
    );

    // carol never connected her account: her sentence, and no call made.
    let before = s.calls();
    let carol_a = s.invoke_as(&carol, "node-a");
    let sentence = said(&carol_a);
    assert!(
        sentence.contains(&format!(
            "tool 'whoami' of server 'people' failed: {}#carol has no credential for server 'people': \
             the authorization server refused the token exchange (400 Bad Request): invalid_grant: \
             carol has not connected their account; they connect their account for 'people' at its \
             authorization server (or its admin grants it), then invoke again",
            s.issuer
        )),
        "{carol_a}"
    );
    assert_eq!(s.calls(), before, "a call was made for carol");

    // alice's grant is revoked: her next call fails, bob's do not.
    let revoke = Command::new("curl")
        .args([
            "-sf",
            "-X",
            "POST",
            &format!("{}/admin/revoke?sub=alice", s.issuer),
        ])
        .output()
        .unwrap();
    assert!(revoke.status.success());
    let alice_again = s.invoke_as(&alice, "node-a");
    assert!(
        said(&alice_again).contains("alice has no credential for server 'people'")
            && !said(&alice_again).contains("sub="),
        "{alice_again}"
    );
    let bob_again = s.invoke_as(&bob, "node-a");
    assert!(
        said(&bob_again).contains("sub=bob act=spiffe://spear.test/node/node-a"),
        "{bob_again}"
    );

    // Every call the server served: exactly these, each its own person's.
    let calls = s.calls();
    let served: Vec<&str> = calls.lines().collect();
    assert_eq!(
        served,
        [
            "sub=alice act=spiffe://spear.test/node/node-a",
            "sub=bob act=spiffe://spear.test/node/node-b",
            "sub=bob act=spiffe://spear.test/node/node-a",
            "sub=spiffe://spear.test/node/node-b act=none",
            "sub=bob act=spiffe://spear.test/node/node-a",
        ]
    );

    // The trail names principal and actor for every call of every run.
    for (who, node, run) in [
        ("alice", "node-a", &alice_a),
        ("bob", "node-b", &bob_b),
        ("carol", "node-a", &carol_a),
        ("alice", "node-a", &alice_again),
    ] {
        let invocation = run["invocation_id"].as_str().unwrap().to_string();
        let records = eventually(
            "the run's tool call at SMS",
            Duration::from_secs(20),
            || {
                let (_, out, _) = s.sms.client(&["audit", "--json", "--task", "notes"]);
                let calls: Vec<Value> = out
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|r| r["invocation"] == invocation.as_str() && r["kind"] == "tool_call")
                    .collect();
                (!calls.is_empty()).then_some(calls.clone()).ok_or(out)
            },
        );
        for record in records {
            assert_eq!(
                record["principal"],
                format!("{}#{who}", s.issuer),
                "{record}"
            );
            assert_eq!(record["actor"], format!("node/{node}"), "{record}");
        }
    }

    // A hostile server names an authorization server of its own: alice's
    // token is not sent there; the call says why, and the server sees none.
    let hostile = s.invoke_task_as("rogue", &alice, "node-a");
    assert!(
        said(&hostile).contains(&format!(
            "the person's token was issued by {}: it is exchanged only where it was issued, so it is not sent there",
            s.issuer
        )),
        "{hostile}"
    );
    // No exchange request reached it (it answers each with EXCHANGE or
    // REFUSED); the node's own workload JWT, made for it alone, did.
    let rogue = s.rogue.log();
    assert!(
        !rogue.contains("EXCHANGE") && !rogue.contains("REFUSED"),
        "{rogue}"
    );
    assert_eq!(
        std::fs::read_to_string(&s.rogue_calls).unwrap_or_default(),
        ""
    );

    // A node that makes up a delegation, or one that is not a node at all,
    // gets nobody's token.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let forged = runtime
        .block_on(token_as(&s, "node-b", b"sealed-for-nobody"))
        .unwrap_err();
    assert_eq!(forged.code(), tonic::Code::PermissionDenied, "{forged:?}");
    assert!(
        forged
            .message()
            .contains("the run's delegation does not open with SMS's key"),
        "{forged:?}"
    );

    // Alice's real delegation for a run on node-a, copied to node-b (a
    // member with its own valid certificate): refused, naming both nodes.
    let for_a = Delegation::new(
        "node-a",
        &format!("{}#alice", s.issuer),
        &alice,
        Duration::from_secs(60),
    )
    .seal(&s.key)
    .unwrap();
    let copied = runtime
        .block_on(token_as(&s, "node-b", &for_a))
        .unwrap_err();
    assert_eq!(copied.code(), tonic::Code::PermissionDenied, "{copied:?}");
    assert!(
        copied
            .message()
            .contains("sealed for node 'node-a', not 'node-b'"),
        "{copied:?}"
    );
    // The same bytes from node-a buy alice's token: what node-b was
    // refused is a delegation that works.
    let own = runtime.block_on(token_as(&s, "node-a", &for_a));
    assert!(
        own.as_ref().is_ok_and(|t| !t.access_token.is_empty()),
        "{:?}",
        own.map(|t| t.access_token.len())
    );

    // Nothing of any token, nor the client secret, where people look.
    let (_, status, _) = s.sms.client(&["status", "--json"]);
    let mut places = vec![
        ("sms log", s.sms.proc.log()),
        ("sms status", status),
        ("model", s.model.log()),
        ("authorization server", s.provider.log()),
    ];
    for node in &s.nodes {
        places.push(("node log", node.proc.log()));
    }
    for (place, text) in &places {
        for token in [&alice, &bob, &carol] {
            let signature = token.rsplit('.').next().unwrap();
            assert!(!text.contains(signature), "an ID token in the {place}");
        }
        assert!(
            !text.contains(CLIENT_SECRET),
            "the client secret in the {place}"
        );
    }
}

/// SMS's answer when node `node` (with its own certificate) asks for a
/// token of server people with `delegation`.
async fn token_as(
    s: &Setup,
    node: &str,
    delegation: &[u8],
) -> Result<AccessTokenResponse, tonic::Status> {
    let tls = s.certs.node(node).identity().unwrap();
    let (endpoint, dialer) = dial(&s.sms.grpc, Some(&tls), Identity::Sms).unwrap();
    let channel = dialer.connect(endpoint).await.unwrap();
    CredentialsClient::new(channel)
        .get_access_token(AccessTokenRequest {
            server_id: "people".into(),
            delegation: delegation.to_vec().into(),
            ..Default::default()
        })
        .await
        .map(tonic::Response::into_inner)
}
