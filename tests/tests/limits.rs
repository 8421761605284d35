//! Floods from one identity (issue 11): forged heartbeats as fast as a
//! client can send them, thousands of watch streams, and oversized
//! requests, all from a holder of one node certificate. Each is refused or
//! shed, the real node stays synced, and SMS's memory stays bounded. With
//! etcd, a node that heartbeats often still holds one lease.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_identity::{dial, Identity, TlsIdentity};
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{HeartbeatRequest, ServerProblem, WatchRequest};
use spear_tests::certs::Certs;
use spear_tests::etcd::EtcdServer;
use spear_tests::fixtures::{stdio_server, write_file};
use spear_tests::history::converged;
use spear_tests::procs::{rss_kib, SmsOptions, SmsProc, SpearletProc};
use spear_tests::runtime;
use tonic::transport::Channel;
use tonic::Code;

/// SMS's resident memory may grow by at most this during the floods.
const RSS_GROWTH_BOUND_KIB: u64 = 128 * 1024;

async fn channels(sms: &str, tls: Option<&TlsIdentity>, n: usize) -> Vec<Channel> {
    let mut out = Vec::new();
    for _ in 0..n {
        let (endpoint, dialer) = dial(sms, tls, Identity::Sms).unwrap();
        out.push(dialer.connect(endpoint).await.unwrap());
    }
    out
}

fn heartbeat(node_id: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        node_id: node_id.into(),
        invoke_addr: "127.0.0.1:1".into(),
        ..Default::default()
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    shed: AtomicU64,
    other: AtomicU64,
}

impl Tally {
    fn count(&self, result: Result<(), tonic::Status>) {
        let counter = match result {
            Ok(()) => &self.ok,
            Err(s) if s.code() == Code::ResourceExhausted => &self.shed,
            Err(_) => &self.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    fn get(&self) -> (u64, u64, u64) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (load(&self.ok), load(&self.shed), load(&self.other))
    }
}

#[test]
fn floods_from_one_identity_are_shed_while_the_real_node_stays_synced() {
    let certs = Certs::new("spear.test");
    let work = tempfile::tempdir().unwrap();
    let mcp = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp).unwrap();
    write_file(&mcp, "a.json", &stdio_server("a", "before"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(mcp.clone()),
        tls: Some(certs.sms()),
        client_tls: Some(certs.admin("ops")),
        ..Default::default()
    });
    let node = SpearletProc::start_with(
        "node-a",
        &sms.grpc,
        &work.path().join("node-a"),
        &certs.node("node-a").args(),
    );
    converged(&sms, &node);
    let pid = sms.proc.pid().unwrap();
    let rss_before = rss_kib(pid);
    let attacker = certs.node("node-x");

    let rt = runtime();
    let (beats, rate, watches) = rt.block_on(async {
        let tls = attacker.identity().unwrap();
        // Heartbeats: 64 callers over 8 connections for 3 s.
        let conns = channels(&sms.grpc, Some(&tls), 8).await;
        let tally = Arc::new(Tally::default());
        let until = Instant::now() + Duration::from_secs(3);
        let mut callers = Vec::new();
        for i in 0..64 {
            let mut client = NodesClient::new(conns[i % conns.len()].clone());
            let tally = Arc::clone(&tally);
            callers.push(tokio::spawn(async move {
                while Instant::now() < until {
                    tally.count(client.heartbeat(heartbeat("node-x")).await.map(|_| ()));
                }
            }));
        }
        for caller in callers {
            caller.await.unwrap();
        }
        let beats = tally.get();
        let rate = (beats.0 + beats.1 + beats.2) as f64 / 3.0;

        // 5,000 watch streams over 40 connections; accepted ones stay open.
        let conns = channels(&sms.grpc, Some(&tls), 40).await;
        let watch_tally = Tally::default();
        let mut open = Vec::new();
        let mut opening = Vec::new();
        for i in 0..5000 {
            let mut client = RegistryClient::new(conns[i % conns.len()].clone());
            opening.push(tokio::spawn(async move {
                client
                    .watch(WatchRequest {
                        node_id: "node-x".into(),
                        epoch: 0,
                        revision: 0,
                    })
                    .await
            }));
        }
        for call in opening {
            match call.await.unwrap() {
                Ok(stream) => {
                    watch_tally.count(Ok(()));
                    open.push(stream);
                }
                Err(status) => watch_tally.count(Err(status)),
            }
        }
        (beats, rate, (watch_tally.get(), open))
    });
    let ((watch_ok, watch_shed, watch_other), open_streams) = watches;
    eprintln!(
        "heartbeats: {} accepted, {} shed, {} other at {rate:.0}/s; watches: {watch_ok} open, {watch_shed} shed, {watch_other} other",
        beats.0, beats.1, beats.2
    );
    // At most one per 20 ms gets through: 150 in 3 s, and a few at the edges.
    assert!(beats.0 <= 160, "{beats:?}");
    assert!(beats.1 > beats.0, "{beats:?}");
    assert_eq!(beats.2, 0, "{beats:?}");
    assert_eq!(watch_ok, 4);
    assert_eq!(watch_shed, 4996);

    // Oversized requests: refused before SMS holds them.
    rt.block_on(async {
        let tls = attacker.identity().unwrap();
        let conn = channels(&sms.grpc, Some(&tls), 1).await.remove(0);
        let mut big = heartbeat("node-x");
        big.problems = vec![
            ServerProblem {
                server_id: "s".into(),
                message: "x".repeat(64 * 1024),
                failed: true,
            };
            40
        ];
        let status = NodesClient::new(conn.clone())
            .heartbeat(big)
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
        let status = RegistryClient::new(conn)
            .watch(WatchRequest {
                node_id: "x".repeat(100 * 1024),
                epoch: 0,
                revision: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    });

    // The real node kept its stream and follows a change; memory stayed put.
    write_file(&mcp, "b.json", &stdio_server("b", "after the floods"));
    converged(&sms, &node);
    let rss_after = rss_kib(pid);
    eprintln!("SMS RSS {rss_before} KiB before, {rss_after} KiB after");
    assert!(
        rss_after < rss_before + RSS_GROWTH_BOUND_KIB,
        "SMS grew from {rss_before} to {rss_after} KiB"
    );
    drop(open_streams);
}

#[test]
fn a_replica_holds_one_etcd_lease_however_many_nodes_and_heartbeats() {
    let etcd = EtcdServer::start();
    let sms = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        ..Default::default()
    });
    let rt = runtime();
    rt.block_on(async {
        let conn = channels(&sms.grpc, None, 1).await.remove(0);
        let mut client = NodesClient::new(conn);
        // Heartbeats as fast as SMS takes them (closer than 20 ms apart it
        // sheds them), until 20 were accepted, their records changing.
        let mut accepted = 0;
        while accepted < 20 {
            let mut beat = heartbeat("n1");
            beat.running = accepted % 3;
            match client.heartbeat(beat).await {
                Ok(_) => accepted += 1,
                Err(status) => assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}"),
            }
        }
        client.heartbeat(heartbeat("n2")).await.unwrap();
    });
    // One lease for the replica (each node's record lives under it), not
    // one per node, let alone per heartbeat.
    let leases = etcd.etcdctl(&["lease", "list"]).unwrap();
    // etcdctl prints "found N leases" and then one id per line.
    assert!(leases.starts_with("found 1 leases"), "{leases}");
    let records = etcd
        .etcdctl(&["get", "/spear/nodes/", "--prefix", "--keys-only"])
        .unwrap();
    assert_eq!(records.split_whitespace().count(), 2, "{records}");
}
