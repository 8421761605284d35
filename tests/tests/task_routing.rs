//! Invocation routing with the real binaries: SMS picks among nodes, skips a
//! dead one, never runs a task twice when a node dies mid-run, shares nodes between replicas on
//! etcd, and checks the admin token at SMS; a node fetches
//! and compiles a module once however many invocations ask at once.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spear_tests::etcd::EtcdServer;
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::tasks::{
    cluster, cluster_with, cluster_with_token, fs_task, guest, invoke_json, register, register_at,
    second_node,
};
use spear_tests::wait::eventually;

#[test]
fn sms_routes_around_a_node_that_died_before_the_call() {
    let c = cluster("routed");
    let mut b = second_node(&c);
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");

    // Both nodes take turns.
    let mut seen = std::collections::BTreeSet::new();
    let mut on_a = 0;
    for _ in 0..4 {
        let run = invoke_json(&c, &["fs-agent"]);
        assert_eq!(run["ok"], true, "{run}");
        on_a += usize::from(run["node_id"] == "node-a");
        seen.insert(run["node_id"].as_str().unwrap().to_string());
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    // The first run pinned the fs server's tools (a registry change): both
    // nodes apply it and report themselves idle since, so neither is
    // passed over for lagging behind or for a run it has finished.
    eventually(
        "both nodes current and idle",
        Duration::from_secs(30),
        || {
            let status = c.sms.status();
            let lagging: Vec<String> = status["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["lag"] != 0 || n["running"] != 0)
                .map(|n| n.to_string())
                .collect();
            if lagging.is_empty() {
                Ok(())
            } else {
                Err(lagging.join(", "))
            }
        },
    );

    // node-b dies without a word; SMS still thinks it alive for a while and
    // must skip it: every run lands on node-a, exactly once.
    b.proc.kill();
    for _ in 0..4 {
        let run = invoke_json(&c, &["fs-agent"]);
        assert_eq!(run["ok"], true, "{run}");
        assert_eq!(run["node_id"], "node-a", "{run}");
        assert_eq!(run["trace"].as_array().unwrap().len(), 1);
    }
    assert!(
        c.sms.proc.log().contains("node skipped"),
        "SMS tried the dead node and went on"
    );
    let runs = c.node.proc.log().matches("task run ended").count();
    assert_eq!(runs, on_a + 4, "node-a ran each of its tasks once");
}

/// Runs in progress on `node`.
fn runs_in_progress(node: &SpearletProc) -> f64 {
    spear_tests::http::metric(&node.http, "spearlet_guest_runs_in_progress").unwrap_or(0.0)
}

#[test]
fn a_node_dying_mid_run_is_not_asked_again_nor_is_another() {
    let c = cluster("mid-run");
    let b = second_node(&c);
    // A guest that runs until its CPU budget ends it, 20 s from now.
    let spin = c.modules.join("spin.wat");
    std::fs::write(
        &spin,
        r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#,
    )
    .unwrap();
    let limits = serde_json::json!({"limits": {"cpu_ms": 20000}});
    let (code, _, err) = register(&c, "spin", &spin, &limits, &[]);
    assert_eq!(code, 0, "{err}");

    let (addr, sms) = (c.sms.grpc.clone(), bin("sms"));
    let run = std::thread::spawn(move || {
        Command::new(sms)
            .args(["invoke", "--json", "spin", "--addr", &addr])
            .env_remove("SMS_ADMIN_TOKEN")
            .output()
            .unwrap()
    });
    let mut nodes = [Some(c.node), Some(b)];
    let running = eventually(
        "the run to start on a node",
        Duration::from_secs(30),
        || {
            nodes
                .iter()
                .position(|n| n.as_ref().is_some_and(|n| runs_in_progress(n) == 1.0))
                .ok_or("no node runs it yet".to_string())
        },
    );
    let mut dying = nodes[running].take().unwrap();
    let survivor = nodes[1 - running].take().unwrap();
    dying.proc.kill();

    // The invocation fails now, naming the node, instead of running again
    // on the survivor (which would end 20 s later with the CPU budget).
    let out = run.join().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("CPU budget"), "ran again elsewhere: {text}");
    assert_eq!(
        runs_in_progress(&survivor),
        0.0,
        "the survivor was asked: {text}"
    );
    assert!(
        !c.sms.proc.log().contains("node skipped"),
        "{}",
        c.sms.proc.log()
    );
    assert!(
        !survivor.proc.log().contains("spin"),
        "{}",
        survivor.proc.log()
    );
}

const TOKEN: &str = "s3cret-token-0123456";

#[test]
fn with_an_admin_token_registering_and_invoking_need_it_at_sms_and_sms_never_sends_it_on() {
    let c = cluster_with_token("guarded", Some(TOKEN));
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_ne!(code, 0);
    assert!(err.contains("admin token"), "{err}");
    let token_file = c.work.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let token_file = token_file.display().to_string();
    let (code, _, err) = register(
        &c,
        "fs-agent",
        &guest("fs-agent"),
        &fs_task(),
        &["--token-file", &token_file],
    );
    assert_eq!(code, 0, "{err}");

    let (code, _, err) = c.sms.client(&["invoke", "fs-agent"]);
    assert_ne!(code, 0);
    assert!(err.contains("admin token"), "{err}");
    let (code, _, err) = c
        .sms
        .client_with_token(&["invoke", "fs-agent"], Some("wrong-token-0123456"));
    assert_ne!(code, 0);
    assert!(
        err.contains("token is wrong") && !err.contains(TOKEN),
        "{err}"
    );
    let run = invoke_json(&c, &["fs-agent", "--token-file", &token_file]);
    assert_eq!(run["ok"], true, "{run}");

    // SMS forwarded the run without any credential of its own: on a
    // plaintext loopback node nothing is checked, and with TLS the node
    // checks SMS's certificate (tls.rs). The token stays at SMS.
    assert!(!c.node.proc.log().contains(TOKEN));
    assert!(!c.sms.proc.log().contains(TOKEN));
}

#[test]
fn with_sms_replicas_on_etcd_any_replica_routes_to_a_node_of_another() {
    let etcd = EtcdServer::start();
    let c = cluster_with("reached through a peer", None, Some(&etcd));
    // A second replica: no directory, no nodes of its own.
    let b = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    let (code, _, err) = register_at(
        &b,
        c.work.path(),
        "fs-agent",
        &guest("fs-agent"),
        &fs_task(),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    // Registered at B, seen at A.
    let (code, out, _) = c.sms.client(&["tasks", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains("fs-agent"), "{out}");

    // node-a heartbeats to A only; B routes to it through etcd.
    let (code, out, err) = b.client(&["invoke", "--json", "fs-agent"]);
    assert_eq!(code, 0, "{out}{err}");
    let run: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(run["node_id"], "node-a", "{run}");
    assert!(
        run["stdout"]
            .as_str()
            .unwrap()
            .contains("reached through a peer"),
        "{run}"
    );

    // Once the node is gone A removes its record (no heartbeat within the
    // 15 s TTL), and B says there is no node rather than waiting on a dead one.
    let mut node = c.node;
    node.proc.kill();
    eventually(
        "the node's record to expire",
        Duration::from_secs(40),
        || {
            let (code, _, err) = b.client(&["invoke", "fs-agent"]);
            if code != 0 && err.contains("no healthy node") {
                Ok(())
            } else {
                Err(err)
            }
        },
    );
}

#[test]
fn concurrent_first_invocations_fetch_and_compile_a_module_once() {
    let c = cluster("once");
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let (addr, sms) = (c.sms.grpc.clone(), bin("sms"));
            std::thread::spawn(move || {
                Command::new(sms)
                    .args(["invoke", "fs-agent", "--addr", &addr])
                    .env_remove("SMS_ADMIN_TOKEN")
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for run in runs {
        let out = run.join().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("once"));
    }
    let log = c.node.proc.log();
    assert_eq!(log.matches("guest module fetched").count(), 1, "{log}");
    assert_eq!(log.matches("guest module compiled").count(), 1, "{log}");
}
