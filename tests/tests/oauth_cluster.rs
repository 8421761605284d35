//! OAuth in a cluster, against a certified OpenID Provider (oidc-provider,
//! npm) guarding a Python SDK server that verifies every token: an operator
//! logs in once with `sms oauth login` (a "browser" signs in and consents
//! at the provider's real pages), SMS keeps the credential sealed in etcd
//! and renews it, two SMS replicas renew it once, nodes call the server
//! with tokens they get from SMS over mutual TLS, a revoked refresh token
//! becomes the sentence that says to log in again, and no token, code or
//! client secret shows anywhere an operator or the store can look.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::certs::Certs;
use spear_tests::etcd::EtcdServer;
use spear_tests::peers::peer_file;
use spear_tests::peers::{
    assert_no_secret, node22, npm_dir, oauth_protected_server, python_sdk, LinePeer,
};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::tasks::{calling_once, guest, register_at, replay_model_on};
use spear_tests::wait::{eventually, free_port};

/// How long the provider's access tokens live: long enough for a login and
/// a first call, short enough to wait out.
const TOKEN_TTL_SECS: u64 = 8;
const M2M_SECRET: &str = "m2m-s3cret-7d2e91c4";

struct Setup {
    provider: LinePeer,
    tokens: PathBuf,
    resource: String,
    mcp_dir: PathBuf,
    replicas: Vec<SmsProc>,
    nodes: Vec<SpearletProc>,
    redirect_port: u16,
    _work: tempfile::TempDir,
    _etcd: EtcdServer,
    _certs: Certs,
    _peers: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl Setup {
    fn start() -> Setup {
        let work = tempfile::tempdir().unwrap();
        let certs = Certs::new("spear.test");
        let etcd = EtcdServer::start();
        let (provider_port, redirect_port) = (free_port(), free_port());
        let tokens = work.path().join("accepted-tokens");

        // The protected server names the provider; the provider names it
        // as the resource its tokens are for.
        let issuer = format!("http://127.0.0.1:{provider_port}");
        let server = oauth_protected_server(&issuer, &tokens);
        let resource = server.url("/mcp");
        let mut command = Command::new(node22());
        command
            .arg(peer_file("oidc_provider.mjs"))
            .arg(npm_dir())
            .arg(provider_port.to_string())
            .arg(&resource)
            .arg(format!("http://127.0.0.1:{redirect_port}/callback"))
            .arg(TOKEN_TTL_SECS.to_string())
            .arg(M2M_SECRET);
        let provider = LinePeer::start(command);
        provider.wait_for("READY ");

        let mcp_dir = work.path().join("mcp.d");
        std::fs::create_dir_all(&mcp_dir).unwrap();
        // The fs-agent guest uses the server "fs": here the protected one.
        let servers = json!({"mcpServers": {
            "fs": {"url": resource, "auth": {"client_id": "spear-cli", "scopes": ["docs:read"]}},
        }});
        std::fs::write(mcp_dir.join("servers.json"), servers.to_string()).unwrap();
        let key = work.path().join("oauth.key");
        let out = Command::new(bin("sms"))
            .args(["oauth", "keygen"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");

        // SMS renews client-credentials tokens with the secret from its environment.
        std::env::set_var("SPEAR_TEST_M2M_SECRET", M2M_SECRET);
        std::env::set_var("RUST_LOG", "debug");
        let replicas: Vec<SmsProc> = (0..2)
            .map(|_| {
                SmsProc::start(SmsOptions {
                    mcp_dir: Some(mcp_dir.clone()),
                    etcd: Some(etcd.endpoint()),
                    tls: Some(certs.sms()),
                    client_tls: Some(certs.admin("ops")),
                    extra: vec!["--oauth-key-file".into(), key.display().to_string()],
                    ..Default::default()
                })
            })
            .collect();

        let files = work.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        let mut peers: Vec<Box<dyn std::any::Any + Send + Sync>> = vec![Box::new(server)];
        let (model, url) = replay_model_on(
            work.path(),
            "model",
            &calling_once(work.path(), "fs", "read_note"),
            &files,
            "127.0.0.1:0",
        );
        peers.push(Box::new(model));
        let guests = guest("fs-agent").parent().unwrap().to_path_buf();
        let config = work.path().join("node.toml");
        std::fs::write(
            &config,
            format!(
                "[llm]\ndefault = \"replay\"\n\n[llm.backends.replay]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"recorded\"\n\n[policy]\nmodules = [\"file://{}/\"]\negress = [\"127.0.0.0/8\"]\n",
                guests.display()
            ),
        )
        .unwrap();
        // Each node syncs with, and gets its tokens from, its own replica.
        let nodes: Vec<SpearletProc> = replicas
            .iter()
            .enumerate()
            .map(|(i, sms)| {
                let id = format!("node-{}", i + 1);
                let mut args = vec!["--config".to_string(), config.display().to_string()];
                args.extend(certs.node(&id).args());
                SpearletProc::start_with(&id, &sms.grpc, &work.path().join(&id), &args)
            })
            .collect();
        for (i, sms) in replicas.iter().enumerate() {
            let id = format!("node-{}", i + 1);
            eventually(
                &format!("{id} to be invocable"),
                Duration::from_secs(30),
                || {
                    let status = sms.status();
                    let ready = status["nodes"].as_array().into_iter().flatten().any(|n| {
                        n["node_id"] == id.as_str() && n["alive"] == true && n["invoke_addr"] != ""
                    });
                    ready.then_some(()).ok_or(status.to_string())
                },
            );
        }
        let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
                          "limits": {"wall_ms": 60000}});
        let (code, _, err) = register_at(
            &replicas[0],
            work.path(),
            "docs",
            &guest("fs-agent"),
            &task,
            &[],
        );
        assert_eq!(code, 0, "{err}");
        Setup {
            provider,
            tokens,
            resource,
            mcp_dir,
            replicas,
            nodes,
            redirect_port,
            _work: work,
            _etcd: etcd,
            _certs: certs,
            _peers: peers,
        }
    }

    /// `sms oauth status --json` at replica `at`: each credential by server id.
    fn credentials(&self, at: usize) -> Value {
        let (code, out, err) = self.replicas[at].client(&["oauth", "status", "--json"]);
        assert_eq!(code, 0, "{err}");
        let status: Value = serde_json::from_str(&out).unwrap();
        let mut by_id = serde_json::Map::new();
        for c in status["credentials"].as_array().unwrap() {
            by_id.insert(c["server_id"].as_str().unwrap().to_string(), c.clone());
        }
        Value::Object(by_id)
    }

    /// `sms oauth login fs` at replica `at`, the browser driven by browser.py.
    fn login(&self, at: usize) -> String {
        let redirect = format!("http://127.0.0.1:{}/", self.redirect_port);
        let browser = format!(
            "{} {} {redirect}",
            python_sdk().display(),
            peer_file("browser.py").display()
        );
        let port = self.redirect_port.to_string();
        let (code, out, err) = self.replicas[at].client(&[
            "oauth",
            "login",
            "fs",
            "--redirect-port",
            &port,
            "--browser",
            &browser,
        ]);
        assert_eq!(code, 0, "login failed:\n{out}\n{err}");
        format!("{out}{err}")
    }

    /// Runs task `task` on node `node` (1 or 2) through replica `at`.
    fn invoke(&self, at: usize, task: &str, node: usize) -> String {
        let node = format!("node-{node}");
        let (_, out, err) = self.replicas[at].client(&["invoke", "--node", &node, task]);
        format!("{out}{err}")
    }

    /// Waits until the access token has expired, as status shows it.
    fn wait_for_expiry(&self) {
        eventually(
            "the access token to expire",
            Duration::from_secs(60),
            || {
                let docs = &self.credentials(0)["fs"];
                (docs["state"] == "expired")
                    .then_some(())
                    .ok_or(docs.to_string())
            },
        );
    }

    fn grants(&self, kind: &str) -> usize {
        self.provider
            .values("GRANT ")
            .iter()
            .filter(|g| *g == kind)
            .count()
    }

    /// Every token, code and secret the run produced.
    fn secrets(&self) -> Vec<String> {
        let mut all: Vec<String> = std::fs::read_to_string(&self.tokens)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        all.extend(self.provider.values("REFRESH "));
        all.extend(self.provider.values("CODE "));
        all.push(M2M_SECRET.to_string());
        all
    }
}

#[test]
fn one_login_serves_the_cluster_and_sms_renews_it_once() {
    let s = Setup::start();
    let mut seen = String::new();

    // Before anyone logs in, a node's call says what to do.
    let before = s.credentials(0);
    assert_eq!(before["fs"]["state"], "not logged in", "{before}");
    let out = s.invoke(0, "docs", 1);
    seen.push_str(&out);
    eventually(
        "node-1 to report the missing login",
        Duration::from_secs(30),
        || {
            let status = s.nodes[0].status()?.to_string();
            status
                .contains("nobody has logged in to server 'fs' yet; run `sms oauth login fs`")
                .then_some(())
                .ok_or(format!("{status}\ninvoke said: {out}"))
        },
    );

    // One login, at replica 1, serves nodes on both replicas.
    seen.push_str(&s.login(0));
    assert_eq!(s.grants("authorization_code"), 1);
    let docs = s.credentials(1)["fs"].clone();
    assert_eq!(docs["state"], "valid", "{docs}");
    assert_eq!(docs["has_refresh_token"], true, "{docs}");
    assert_eq!(docs["logged_in_by"], "admin/ops", "{docs}");
    // node-1 tried before the login and waits out its reconnect backoff.
    for node in [1, 2] {
        let out = eventually(
            &format!("node-{node} to call the server"),
            Duration::from_secs(30),
            || {
                let out = s.invoke(0, "docs", node);
                out.contains("the server said: authorized")
                    .then_some(out.clone())
                    .ok_or(out)
            },
        );
        seen.push_str(&out);
    }
    assert_eq!(s.grants("refresh_token"), 0, "nothing was due yet");

    // Past expiry both nodes call at once, each through its own replica:
    // the credential is renewed once, and the refresh token rotated.
    s.wait_for_expiry();
    let accepted_before = std::fs::read_to_string(&s.tokens).unwrap();
    let setup = &s;
    let outs: Vec<String> = std::thread::scope(|scope| {
        let calls: Vec<_> = [(0, 1), (1, 2)]
            .map(|(at, node)| scope.spawn(move || setup.invoke(at, "docs", node)))
            .into_iter()
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    for out in &outs {
        assert!(out.contains("the server said: authorized"), "{out}");
        seen.push_str(out);
    }
    assert_eq!(s.grants("refresh_token"), 1, "{:?}", s.provider.lines());
    assert_eq!(
        s.provider.values("CONSUMED").len(),
        1,
        "the old refresh token was spent"
    );
    assert_eq!(
        s.provider.values("REFRESH ").len(),
        2,
        "a new refresh token was issued"
    );
    let accepted_after = std::fs::read_to_string(&s.tokens).unwrap();
    let new_tokens: Vec<&str> = accepted_after[accepted_before.len()..].lines().collect();
    assert!(
        !new_tokens.is_empty() && new_tokens.iter().all(|t| !accepted_before.contains(t)),
        "the calls after expiry used a renewed token"
    );
    let docs = s.credentials(1)["fs"].clone();
    assert_eq!(docs["state"], "valid", "{docs}");
    assert!(docs["refreshed_at_ms"].as_u64().unwrap() > 0, "{docs}");

    // The provider's administrator revokes the grant: the next renewal is
    // refused, and the operator is told to log in again.
    let revoked = Command::new("curl")
        .args(["-sf", "-X", "POST"])
        .arg(format!("{}/test/revoke", s.provider.values("READY ")[0]))
        .output()
        .unwrap();
    assert!(revoked.status.success(), "{revoked:?}");
    s.wait_for_expiry();
    let out = s.invoke(0, "docs", 1);
    assert!(
        out.contains("can no longer be renewed") && out.contains("sms oauth login fs"),
        "{out}"
    );
    seen.push_str(&out);
    assert_eq!(s.provider.values("GRANT_ERROR "), ["invalid_grant"]);
    let docs = s.credentials(1)["fs"].clone();
    assert_eq!(docs["state"], "needs login", "{docs}");
    let problem = docs["problem"].as_str().unwrap();
    assert!(problem.contains("refused the refresh token"), "{problem}");
    eventually(
        "node-1 to say to log in again",
        Duration::from_secs(30),
        || {
            let status = s.nodes[0].status()?.to_string();
            status
                .contains("can no longer be renewed")
                .then_some(())
                .ok_or(status)
        },
    );
    let (_, table, _) = s.replicas[0].client(&["oauth", "status"]);
    assert!(
        table.contains("needs login") && table.contains("refused the refresh token"),
        "{table}"
    );
    seen.push_str(&table);

    // Logging in again puts it right, for every node, without a restart.
    seen.push_str(&s.login(1));
    let out = s.invoke(1, "docs", 1);
    assert!(out.contains("the server said: authorized"), "{out}");
    seen.push_str(&out);

    // Machine to machine: the server file switches to client credentials,
    // and SMS buys the token itself with the secret from its environment.
    let servers = json!({"mcpServers": {"fs": {"url": s.resource, "auth": {
        "grant": "client_credentials", "client_id": "spear-m2m", "client_secret": "${SPEAR_TEST_M2M_SECRET}"}}}});
    std::fs::write(s.mcp_dir.join("servers.json"), servers.to_string()).unwrap();
    eventually(
        "the nodes to have the new grant",
        Duration::from_secs(30),
        || {
            let seen_by = |n: &SpearletProc| {
                n.registry()
                    .map(|r| r.to_string().contains("client_credentials"))
            };
            match (seen_by(&s.nodes[0])?, seen_by(&s.nodes[1])?) {
                (true, true) => Ok(()),
                _ => Err("not yet".into()),
            }
        },
    );
    let out = s.invoke(0, "docs", 2);
    assert!(out.contains("the server said: authorized"), "{out}");
    seen.push_str(&out);
    assert_eq!(s.grants("client_credentials"), 1);
    let fs = s.credentials(1)["fs"].clone();
    assert_eq!(fs["grant"], "client_credentials", "{fs}");

    // No token, code or secret anywhere: CLI output, status, logs, the store.
    let secrets = s.secrets();
    assert!(secrets.len() >= 6, "{secrets:?}");
    assert_no_secret("the CLI's output", &seen, &secrets);
    for (i, sms) in s.replicas.iter().enumerate() {
        assert_no_secret(&format!("replica {i}'s log"), &sms.proc.log(), &secrets);
        let (_, status, _) = sms.client(&["status", "--json"]);
        assert_no_secret("sms status", &status, &secrets);
    }
    for node in &s.nodes {
        assert_no_secret(
            &format!("{}'s log", node.node_id),
            &node.proc.log(),
            &secrets,
        );
        assert_no_secret(
            "the node's status",
            &node.status().unwrap().to_string(),
            &secrets,
        );
    }
    let stored = s._etcd.etcdctl(&["get", "--prefix", "/spear/"]).unwrap();
    assert!(
        stored.contains("/spear/oauth/credentials/fs"),
        "the credential is in etcd"
    );
    assert_no_secret("etcd", &stored, &secrets);
}
