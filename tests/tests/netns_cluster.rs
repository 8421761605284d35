//! The plane across a network (issue 11): a three-member etcd cluster with
//! TLS and client certificates, two SMS replicas and three spearlets, each
//! process in its own network namespace with its own address, every
//! certificate from `sms certs`. The registry moves through a file drop and
//! an admin write, a task runs through each replica, strangers are refused
//! (a plaintext client, one without a certificate, a node certificate
//! calling admin APIs or another node, a forged heartbeat, a plaintext SMS
//! on a namespace's address), and every node's applied history checks out
//! against both replicas.

use std::time::Duration;

use serde_json::{json, Value};
use spear_identity::{dial, Identity};
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::HeartbeatRequest;
use spear_tests::certs::Certs;
use spear_tests::etcd::EtcdCluster;
use spear_tests::fixtures::{stdio_server, write_file};
use spear_tests::history::converged;
use spear_tests::netns::{self, Bridge, Netns};
use spear_tests::peers::npm_bin;
use spear_tests::plane::{etcd_client_args, node_toml, places};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::runtime;
use spear_tests::tasks::{guest, register_at, replay_model_on, repo_file};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(60);

/// Waits until every node heartbeats, with its invocation address, to one
/// of the replicas (each tracks its own nodes; they share them for routing
/// through etcd).
fn invocable(smses: &[SmsProc], nodes: &[SpearletProc]) {
    eventually("every node to be invocable", SOON, || {
        let statuses: Vec<Value> = smses.iter().map(SmsProc::status).collect();
        let ready = |id: &str| {
            statuses.iter().any(|status| {
                status["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|n| n["node_id"] == id && n["alive"] == true && n["invoke_addr"] != "")
            })
        };
        nodes
            .iter()
            .all(|n| ready(&n.node_id))
            .then_some(())
            .ok_or(format!("{statuses:?}"))
    });
}

/// Node `id` as the replica it heartbeats to lists it (null if none does).
fn listed(smses: &[SmsProc], id: &str) -> Value {
    smses
        .iter()
        .flat_map(|sms| {
            sms.status()["nodes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|n| n["node_id"] == id)
        .unwrap_or_default()
}

#[test]
fn a_tls_cluster_across_network_namespaces_converges_and_runs_tasks() {
    assert!(
        netns::available(),
        "this test makes network namespaces: run it as root with iproute2 installed (CI does)"
    );
    let certs = Certs::new("spear.test");
    let work = tempfile::tempdir().unwrap();
    let mut bridge = Bridge::new();
    let etcd_ns: Vec<Netns> = (0..3).map(|_| bridge.netns()).collect();
    let sms_ns: Vec<Netns> = (0..2).map(|_| bridge.netns()).collect();
    let node_ns: Vec<Netns> = (0..3).map(|_| bridge.netns()).collect();
    let etcd = EtcdCluster::start(&certs, &places(&etcd_ns));

    let files = work.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    std::fs::write(files.join("notes.txt"), "across namespaces").unwrap();
    let mcp = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp).unwrap();
    let fs = json!({"mcpServers": {"fs": {
        "command": npm_bin("mcp-server-filesystem"), "args": [files],
        "allowed_tools": ["read_*", "list_*"],
    }}});
    std::fs::write(mcp.join("fs.json"), fs.to_string()).unwrap();
    let (_model, model_url) = replay_model_on(
        work.path(),
        "model",
        &repo_file("examples/replay/fs-agent.json"),
        &files,
        &format!("{}:0", bridge.host_ip()),
    );
    let config = node_toml(work.path(), &model_url, &files);

    let sms_tls = certs.sms();
    let admin = certs.admin("ops");
    let etcd_client = etcd_client_args(&sms_tls);
    let smses: Vec<SmsProc> = sms_ns
        .iter()
        .map(|ns| {
            SmsProc::start(SmsOptions {
                mcp_dir: Some(mcp.clone()),
                etcd: Some(etcd.endpoints.join(",")),
                tls: Some(sms_tls.clone()),
                client_tls: Some(admin.clone()),
                extra: etcd_client.clone(),
                place: Some(ns.place()),
                ..Default::default()
            })
        })
        .collect();
    let (a, b) = (smses[0].grpc.clone(), smses[1].grpc.clone());
    let nodes: Vec<SpearletProc> = node_ns
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            let id = format!("node-{i}");
            let order = if i % 2 == 0 { [&a, &b] } else { [&b, &a] };
            let mut args = vec!["--config".to_string(), config.display().to_string()];
            args.extend(certs.node(&id).args());
            let sms = format!("{},{}", order[0], order[1]);
            SpearletProc::start_in(Some(&ns.place()), &id, &sms, &work.path().join(&id), &args)
        })
        .collect();
    for node in &nodes {
        assert!(node.http.starts_with("https://10.77."), "{}", node.http);
        // From beyond its machine, without an admin certificate, the
        // node's reports are refused; its probes and metrics are not.
        let (code, body) = spear_tests::http::get_status(&node.http, "/status").unwrap();
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("admin certificate"), "{body}");
        let (code, _) = spear_tests::http::get_status(&node.http, "/registry").unwrap();
        assert_eq!(code, 403);
        assert_eq!(
            spear_tests::http::get_status(&node.http, "/livez")
                .unwrap()
                .0,
            200
        );
        assert!(spear_tests::http::get(&node.http, "/metrics").is_ok());
    }
    // As an admin, with the admin's certificate, from here.
    spear_tests::http::present(&admin.cert, &admin.key);
    for node in &nodes {
        assert!(node.status().is_ok(), "an admin reads a node's status");
        converged(&smses[0], node);
    }

    // A file drop, then an admin write through the other replica.
    write_file(
        &mcp,
        "b.json",
        &stdio_server("b", "dropped in the directory"),
    );
    for node in &nodes {
        converged(&smses[1], node);
    }
    let spec = work.path().join("api.json");
    let api =
        json!({"id": "api", "transport": "streamable_http", "url": "https://mcp.example.com/mcp"});
    std::fs::write(&spec, api.to_string()).unwrap();
    let (code, _, err) = smses[1].client(&["apply", &spec.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    for node in &nodes {
        converged(&smses[0], node);
    }

    // A task, registered at one replica, run through each.
    let task = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
                      "limits": {"wall_ms": 60000}});
    let (code, _, err) = register_at(
        &smses[0],
        work.path(),
        "fs-agent",
        &guest("fs-agent"),
        &task,
        &[],
    );
    assert_eq!(code, 0, "{err}");
    invocable(&smses, &nodes);
    let mut ran_on = Vec::new();
    for sms in &smses {
        for _ in 0..2 {
            let (code, out, err) = sms.client(&["invoke", "--json", "fs-agent"]);
            let run: Value = serde_json::from_str(&out)
                .unwrap_or_else(|e| panic!("exit {code}: {e}: {out}{err}"));
            assert_eq!(run["ok"], true, "{run}");
            assert!(
                run["stdout"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("across namespaces"),
                "{run}"
            );
            ran_on.push(run["node_id"].as_str().unwrap_or_default().to_string());
        }
    }
    eprintln!("runs went to {ran_on:?}");

    // Strangers, across the bridge from the root namespace: each refused
    // with a sentence, and nothing changes.
    let servers_before = smses[0].client(&["servers"]).1;
    let node_0 = listed(&smses, "node-0");
    let node_0_addr = node_0["invoke_addr"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ca_only = vec!["--tls-ca".to_string(), certs.ca().display().to_string()];
    let node_1 = certs.node("node-1").args();
    let evil = work.path().join("evil.json");
    std::fs::write(
        &evil,
        r#"{"id": "evil", "command": "/bin/sh", "args": ["-c", "id"]}"#,
    )
    .unwrap();
    let evil = evil.display().to_string();
    let refusals: [(&[&str], &[String], &str); 5] = [
        (&["status"], &[], "pass --tls-ca"),
        (
            &["status"],
            &ca_only,
            "GetStatus refused before it was read: this port needs a client certificate",
        ),
        (
            &["servers"],
            &ca_only,
            "ListServers refused before it was read: this port needs a client certificate",
        ),
        (
            &["apply", &evil],
            &node_1,
            "is for admins; the caller is node/node-1",
        ),
        (
            &[
                "invoke",
                "fs-agent",
                "--node",
                "node-0",
                "--node-addr",
                &node_0_addr,
            ],
            &node_1,
            "invocations come from SMS or an admin; the caller is node/node-1",
        ),
    ];
    for (args, tls, expect) in refusals {
        for sms in &smses {
            let (code, text) = sms.client_as(args, tls);
            assert!(code != 0 && text.contains(expect), "{args:?}: {text}");
        }
    }
    let forged = runtime().block_on(async {
        let tls = certs.node("node-1").identity().unwrap();
        let (endpoint, dialer) = dial(&smses[0].grpc, Some(&tls), Identity::Sms).unwrap();
        let channel = dialer.connect(endpoint).await.unwrap();
        NodesClient::new(channel)
            .heartbeat(HeartbeatRequest {
                node_id: "node-0".into(),
                invoke_addr: "10.77.0.99:1".into(),
                ..Default::default()
            })
            .await
    });
    assert_eq!(forged.unwrap_err().code(), tonic::Code::PermissionDenied);
    let plaintext = bridge.netns();
    let out = plaintext
        .place()
        .command(bin("sms"))
        .args(["serve", "--metrics-listen", "off", "--listen"])
        .arg(format!("{}:7300", plaintext.ip))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("without TLS"),
        "{text}"
    );
    assert_eq!(smses[0].client(&["servers"]).1, servers_before);
    assert_eq!(
        listed(&smses, "node-0")["invoke_addr"],
        node_0_addr.as_str()
    );

    // Every node's history, against each replica.
    for sms in &smses {
        for node in &nodes {
            converged(sms, node);
        }
    }
}
