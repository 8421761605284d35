//! A fleet quota across replicas (issue 40, acceptance 1): a three-member
//! etcd cluster, three SMS replicas and three nodes, each in its own
//! network namespace, TLS everywhere. A batch task makes 2,000 tool calls
//! in a few seconds against 100 a minute, through all three nodes, and one
//! replica is killed mid-way: the fleet accepts at most 100 (SMS grants
//! only what the window has left, whichever replica a node asks), `sms
//! usage` counts exactly the calls that ran, a second task's quota is its
//! own, the counter is on etcd for every replica, and etcd's own metrics
//! say how many requests the quota cost.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::certs::Certs;
use spear_tests::etcd::EtcdCluster;
use spear_tests::netns::{self, Bridge, Netns};
use spear_tests::peers::npm_bin;
use spear_tests::plane::{etcd_client_args, node_toml, places};
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::tasks::{guest, register_at, replay_model_on};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(60);
/// Calls the model asks for in one answer, and runs per node.
const CALLS_PER_RUN: usize = 50;
const RUNS_PER_NODE: usize = 14;
const LIMIT: u64 = 100;

/// A model that asks for `CALLS_PER_RUN` calls at once, then answers.
fn batch_recording(dir: &Path) -> PathBuf {
    let name = spearlet::tools::offered_name("fs", "list_allowed_directories");
    let calls: Vec<Value> = (0..CALLS_PER_RUN)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function",
                        "function": {"name": name, "arguments": "{}"}})
        })
        .collect();
    let path = dir.join("batch.json");
    let turns = json!({"turns": [
        {"role": "assistant", "content": null, "tool_calls": calls},
        {"role": "assistant", "content": "done: {{last_tool_result}}"},
    ]});
    std::fs::write(&path, turns.to_string()).unwrap();
    path
}

fn task() -> Value {
    json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
           "limits": {"wall_ms": 60000, "max_total_tool_calls": 64},
           "quota": {"tool_calls": {"max": LIMIT, "per": "1m"}}})
}

fn invoke(sms: &SmsProc, task: &str, node: &str) -> Value {
    let (code, out, err) = sms.client(&["invoke", "--json", "--node", node, task]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("exit {code}: {e}: {out}{err}"))
}

fn calls_that_ran(run: &Value) -> u64 {
    run["usage"]["tool_calls"].as_u64().unwrap_or(0)
}

#[test]
fn a_quota_holds_across_three_replicas_and_three_nodes_through_a_failover() {
    assert!(
        netns::available(),
        "this test makes network namespaces: run it as root with iproute2 installed (CI does)"
    );
    let certs = Certs::new("spear.test");
    let work = tempfile::tempdir().unwrap();
    let mut bridge = Bridge::new();
    let etcd_ns: Vec<Netns> = (0..3).map(|_| bridge.netns()).collect();
    let sms_ns: Vec<Netns> = (0..3).map(|_| bridge.netns()).collect();
    let node_ns: Vec<Netns> = (0..3).map(|_| bridge.netns()).collect();
    let etcd = EtcdCluster::start(&certs, &places(&etcd_ns));

    let files = work.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
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
        &batch_recording(work.path()),
        &files,
        &format!("{}:0", bridge.host_ip()),
    );
    let config = node_toml(work.path(), &model_url, &files);

    let sms_tls = certs.sms();
    let admin = certs.admin("ops");
    let etcd_client = etcd_client_args(&sms_tls);
    let mut smses: Vec<SmsProc> = sms_ns
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
    let addrs: Vec<String> = smses.iter().map(|s| s.grpc.clone()).collect();
    // Node i follows replica i first, replica 0 after it.
    let nodes: Vec<SpearletProc> = node_ns
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            let id = format!("node-{i}");
            let mut args = vec!["--config".to_string(), config.display().to_string()];
            args.extend(certs.node(&id).args());
            let sms = format!("{},{}", addrs[i], addrs[0]);
            SpearletProc::start_in(Some(&ns.place()), &id, &sms, &work.path().join(&id), &args)
        })
        .collect();
    let unlimited = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
                           "limits": {"wall_ms": 60000, "max_total_tool_calls": 64}});
    for (name, config) in [("batch", task()), ("other", task()), ("warm", unlimited)] {
        let (code, _, err) = register_at(
            &smses[0],
            work.path(),
            name,
            &guest("fs-agent"),
            &config,
            &[],
        );
        assert_eq!(code, 0, "{err}");
    }
    // Each node runs a task without a quota through replica 0 once it can.
    for node in &nodes {
        eventually("the node to run a task", SOON, || {
            let run = invoke(&smses[0], "warm", &node.node_id);
            (run["exit_code"] == 0).then_some(()).ok_or(run.to_string())
        });
    }
    let (txn_before, range_before) = (etcd.received("Txn"), etcd.received("Range"));

    // 3 nodes × 14 runs × 50 calls = 2,100 calls, all through replica 0;
    // replica 2, which node-2 follows, is killed after a third of them.
    let mut doomed = smses.pop().unwrap();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let started_minute = spear_common::clock::now_ms() / 60_000;
    let (replica, done) = (&smses[0], &done);
    let runs: Vec<Value> = std::thread::scope(|scope| {
        scope.spawn(move || {
            eventually("a third of the runs", SOON, || {
                let n = done.load(std::sync::atomic::Ordering::Relaxed);
                (n >= RUNS_PER_NODE).then_some(()).ok_or(n.to_string())
            });
            doomed.proc.kill();
        });
        let handles: Vec<_> = (0..3)
            .map(|i| {
                scope.spawn(move || {
                    (0..RUNS_PER_NODE)
                        .map(|_| {
                            let run = invoke(replica, "batch", &format!("node-{i}"));
                            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            run
                        })
                        .collect::<Vec<Value>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let minutes = spear_common::clock::now_ms() / 60_000 - started_minute + 1;
    let accepted: u64 = runs.iter().map(calls_that_ran).sum();
    let attempted = runs.len() * CALLS_PER_RUN;
    eprintln!("{attempted} calls, {accepted} ran, over {minutes} window(s)");
    assert!(accepted <= LIMIT * minutes, "{accepted} calls ran");
    if minutes == 1 {
        assert!(
            accepted >= LIMIT - 10,
            "slices lost to the killed replica are few: {accepted} ran"
        );
    }
    let quota_requests = etcd.received("Txn") - txn_before + etcd.received("Range") - range_before;
    // Every run ended well: a refused call is a tool result.
    for run in &runs {
        assert_eq!(run["exit_code"], 0, "{run:#}");
    }
    let refused = runs
        .iter()
        .filter_map(|r| r["stdout"].as_str())
        .filter(|out| out.contains("task 'batch' has used its quota of 100 tool calls per 1m"))
        .count();
    assert!(refused > 0, "the quota's sentence reached the model");

    // The counter is on etcd, for every replica.
    let counters = etcd
        .etcdctl(&["get", "--prefix", "/spear/quotas/task/batch/"])
        .unwrap();
    assert!(
        counters.contains("/spear/quotas/task/batch/tool_calls"),
        "{counters}"
    );

    // A second task's quota is its own.
    let other = invoke(&smses[0], "other", "node-1");
    assert_eq!(calls_that_ran(&other), CALLS_PER_RUN as u64, "{other:#}");

    // `sms usage` counts exactly the calls that ran, from the records
    // every node shipped (node-2's through replica 0 after the failover).
    eventually("every record at SMS", SOON, || {
        let (code, out, err) = smses[0].client(&["usage", "--json", "--task", "batch"]);
        let usage: Value =
            serde_json::from_str(&out).map_err(|e| format!("{code} {e}: {out}{err}"))?;
        (usage["runs"] == runs.len() && usage["tool_calls"] == accepted)
            .then_some(())
            .ok_or(format!("{usage} (runs {}, ran {accepted})", runs.len()))
    });

    // The same-run baseline: the same calls of a task without a quota.
    let (txn_before, range_before) = (etcd.received("Txn"), etcd.received("Range"));
    let replica = &smses[0];
    std::thread::scope(|scope| {
        for i in 0..3 {
            scope.spawn(move || {
                for _ in 0..RUNS_PER_NODE {
                    invoke(replica, "warm", &format!("node-{i}"));
                }
            });
        }
    });
    let baseline = etcd.received("Txn") - txn_before + etcd.received("Range") - range_before;
    let per_1000 = |n: f64| n * 1000.0 / attempted as f64;
    eprintln!(
        "etcd requests (Txn + Range) per 1,000 calls: quota {:.1}, no quota {:.1}, the quota's own {:.1}",
        per_1000(quota_requests),
        per_1000(baseline),
        per_1000(quota_requests - baseline)
    );
}
