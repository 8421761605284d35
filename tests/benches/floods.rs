//! Cheap floods against the TLS plane (`cargo bench -p spear-tests --bench
//! floods`; build the release binaries first with `cargo build --release
//! --bins`). Issue 25's goal: with 1,000 silent TCP connections and 50
//! concurrent 30 MiB requests without credentials against SMS, and the
//! same against a node, an admin's `GetStatus` (a fresh TLS connection
//! each, as the CLI makes) keeps p99 ≤ 2× its unloaded p99, SMS's and the
//! node's RSS grow by ≤ 64 MiB, and the node's watch is not dropped.
//!
//! SMS runs as the real binary on CPU 0, with the admin's measurements;
//! the node (the real binary, another machine in a cluster) and the
//! attackers run on CPU 1, the attackers connecting from ten other
//! loopback addresses, as they would from other machines. Silent
//! connections the server drops are reopened at once, so the flood is
//! sustained for the whole loaded phase.

#[path = "bench_support/cpu.rs"]
mod cpu;
#[path = "bench_support/stats.rs"]
mod stats;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpu::{pin_process, pin_to};
use spear_identity::{dial, Identity, TlsFlags, TlsIdentity};
use spear_proto::v1::admin_client::AdminClient;
use spear_proto::v1::invocation_client::InvocationClient;
use spear_proto::v1::status_client::StatusClient;
use spear_proto::v1::{InvokeRequest, StatusRequest, UpsertServerRequest};
use spear_tests::certs::{Certs, TlsSet};
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use stats::{machine, rss_kib, Summary};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

const SILENT: usize = 1_000;
const BIG_REQUESTS: usize = 50;
const BIG: usize = 30 * 1024 * 1024;
const SAMPLES: usize = 1_000;

/// One admin status call on a fresh TLS connection, as `sms status`
/// makes; its latency, or why it failed.
async fn admin_status(sms: &str, admin: &TlsIdentity) -> Result<Duration, String> {
    let start = Instant::now();
    let (endpoint, dialer) = dial(sms, Some(admin), Identity::Sms).map_err(|e| e.to_string())?;
    let channel = dialer
        .connect(endpoint.connect_timeout(Duration::from_secs(30)))
        .await
        .map_err(|e| spear_common::text::causes(&e))?;
    StatusClient::new(channel)
        .get_status(StatusRequest::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(start.elapsed())
}

/// The latencies of SAMPLES admin calls, and the failures' reasons.
async fn samples(sms: &str, admin: &TlsIdentity) -> (Summary, Vec<String>) {
    let mut out = Vec::with_capacity(SAMPLES);
    let mut failed = Vec::new();
    for _ in 0..SAMPLES {
        match admin_status(sms, admin).await {
            Ok(latency) => out.push(latency),
            Err(why) => failed.push(why),
        }
    }
    (Summary::of(out), failed)
}

/// The attackers' addresses: other hosts, as far as SMS can tell (all of
/// 127.0.0.0/8 is this machine's loopback); the admin is 127.0.0.1.
const ATTACKERS: u8 = 10;

fn attacker_source(i: usize) -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 2 + (i % ATTACKERS as usize) as u8], 0))
}

/// Keeps one silent TCP connection open to `addr` from `source`,
/// reopening it whenever the server drops it. Counts the drops.
async fn silent(
    addr: String,
    source: std::net::SocketAddr,
    mut stop: watch::Receiver<bool>,
    dropped: Arc<AtomicU64>,
) {
    let target: std::net::SocketAddr = addr.parse().unwrap();
    while !*stop.borrow() {
        let connect = async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(source)?;
            socket.connect(target).await
        };
        let Ok(mut tcp) = connect.await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let mut buf = [0u8; 64];
        tokio::select! {
            _ = tcp.read(&mut buf) => { dropped.fetch_add(1, Ordering::Relaxed); }
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
    }
}

/// Sends 30 MiB requests without a client certificate to `addr` in a loop.
async fn big_requests(
    addr: String,
    node: bool,
    anonymous: TlsIdentity,
    stop: watch::Receiver<bool>,
    refused: Arc<AtomicU64>,
) {
    let expect = if node {
        Identity::Node("node-a".into())
    } else {
        Identity::Sms
    };
    while !*stop.borrow() {
        let (endpoint, dialer) = dial(&addr, Some(&anonymous), expect.clone()).unwrap();
        let Ok(channel) = dialer.connect(endpoint).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let result = if node {
            InvocationClient::new(channel)
                .max_encoding_message_size(usize::MAX)
                .invoke(InvokeRequest {
                    input: vec![b'x'; BIG].into(),
                    ..Default::default()
                })
                .await
                .map(|_| ())
        } else {
            AdminClient::new(channel)
                .max_encoding_message_size(usize::MAX)
                .upsert_server(UpsertServerRequest {
                    spec_json: "x".repeat(BIG),
                })
                .await
                .map(|_| ())
        };
        match result {
            Err(status) if status.code() == tonic::Code::Unauthenticated => {
                refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
            Ok(()) => panic!("a request without credentials was accepted"),
        }
    }
}

/// The highest RSS of `pids` seen until `stop`, sampled every 50 ms.
async fn peak_rss(pids: Vec<u32>, mut stop: watch::Receiver<bool>) -> Vec<u64> {
    let mut peak = vec![0; pids.len()];
    let mut every = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.wait_for(|stopped| *stopped) => return peak,
        }
        for (i, pid) in pids.iter().enumerate() {
            peak[i] = peak[i].max(rss_kib(*pid));
        }
    }
}

/// Waits until the flood is in full force, as the servers show it: the
/// handshake tables full (silent connections being dropped) and every
/// loop of large requests refused at least once.
fn flood_in_force(dropped: &AtomicU64, refused: &AtomicU64) {
    let want = (SILENT as u64, 2 * BIG_REQUESTS as u64);
    spear_tests::wait::eventually("the flood to be in force", Duration::from_secs(120), || {
        let seen = (
            dropped.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
        );
        (seen.0 >= want.0 && seen.1 >= want.1)
            .then_some(())
            .ok_or(format!("{seen:?} dropped and refused of {want:?}"))
    });
}

fn node_reconnects(node: &SpearletProc) -> u64 {
    let metrics = spear_tests::http::get(&node.http, "/metrics").unwrap_or_default();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("spearlet_sync_reconnects_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    spear_tests::procs::require_bins(&["sms", "spearlet"]);
    println!("# flood benchmarks, {}", machine());
    let certs = Certs::new("spear.bench");
    let sms = SmsProc::start(SmsOptions {
        tls: Some(certs.sms()),
        client_tls: Some(certs.admin("ops")),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start_with(
        "node-a",
        &sms.grpc,
        &state.path().join("node-a"),
        &certs.node("node-a").args(),
    );
    let node_addr =
        spear_tests::wait::eventually("node-a's heartbeat", Duration::from_secs(30), || {
            let status = sms.status();
            status["nodes"][0]["invoke_addr"]
                .as_str()
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .ok_or(status.to_string())
        });
    let sms_pid = sms.proc.pid().unwrap_or(0);
    let node_pid = node.proc.pid().unwrap_or(0);
    // SMS with the admin on CPU 0; the node, which in a cluster is another
    // machine, with the attackers on CPU 1.
    pin_process(sms_pid, 0);
    pin_process(node_pid, 1);

    // The admin on CPU 0 with SMS; the attackers on CPU 1.
    pin_to(0);
    let admin_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let attack_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(|| pin_to(1))
        .enable_all()
        .build()
        .unwrap();
    let admin_set: TlsSet = certs.admin("ops");
    let admin = admin_rt.block_on(async { admin_set.identity().unwrap() });
    let anonymous = attack_rt.block_on(async {
        TlsFlags {
            ca: Some(certs.ca()),
            cert: None,
            key: None,
        }
        .client()
        .unwrap()
        .unwrap()
    });

    let reconnects_before = node_reconnects(&node);
    let rss_before = (rss_kib(sms_pid), rss_kib(node_pid));
    admin_rt.block_on(samples(&sms.grpc, &admin)); // warm-up
    let (unloaded, unloaded_failed) = admin_rt.block_on(samples(&sms.grpc, &admin));

    let (stop, stopped) = watch::channel(false);
    let dropped = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let peak = attack_rt.spawn(peak_rss(vec![sms_pid, node_pid], stopped.clone()));
    for target in [&sms.grpc, &node_addr] {
        for i in 0..SILENT {
            attack_rt.spawn(silent(
                target.clone(),
                attacker_source(i),
                stopped.clone(),
                Arc::clone(&dropped),
            ));
        }
    }
    for (target, is_node) in [(&sms.grpc, false), (&node_addr, true)] {
        for _ in 0..BIG_REQUESTS {
            attack_rt.spawn(big_requests(
                target.clone(),
                is_node,
                anonymous.clone(),
                stopped.clone(),
                Arc::clone(&refused),
            ));
        }
    }
    flood_in_force(&dropped, &refused);
    let (refused_before, dropped_before) = (
        refused.load(Ordering::Relaxed),
        dropped.load(Ordering::Relaxed),
    );
    let (loaded, loaded_failed) = admin_rt.block_on(samples(&sms.grpc, &admin));
    let refused_during = refused.load(Ordering::Relaxed) - refused_before;
    let dropped_during = dropped.load(Ordering::Relaxed) - dropped_before;
    stop.send_replace(true);
    let peak = attack_rt.block_on(peak).unwrap_or_default();
    let reconnects_after = node_reconnects(&node);
    let streams = sms.status()["watch_streams"].as_u64().unwrap_or(0);

    println!("\n## admin GetStatus on a fresh TLS connection ({SAMPLES} samples each)");
    println!("unloaded: {unloaded}; failed: {}", unloaded_failed.len());
    println!(
        "loaded:   {loaded}; failed: {} (goal 0)",
        loaded_failed.len()
    );
    for why in loaded_failed.iter().take(3) {
        println!("  a failure: {why}");
    }
    let ratio = loaded.p99.as_secs_f64() / unloaded.p99.as_secs_f64();
    println!("p99 loaded ÷ unloaded: {ratio:.2} (goal ≤ 2)");
    println!("\n## the flood");
    println!("{SILENT} silent connections to each of SMS and the node, kept open (reopened {dropped_during} times while the admin measured, after the server dropped them)");
    println!("{BIG_REQUESTS} concurrent 30 MiB requests without credentials to each; {refused_during} refused as unauthenticated while the admin measured");
    println!("\n## memory (RSS)");
    let grow = |before: u64, peak: u64| peak.saturating_sub(before) as f64 / 1024.0;
    let sms_grow = grow(rss_before.0, peak.first().copied().unwrap_or(0));
    let node_grow = grow(rss_before.1, peak.get(1).copied().unwrap_or(0));
    println!(
        "SMS: {:.1} MiB before, peak growth {sms_grow:.1} MiB (goal ≤ 64)",
        rss_before.0 as f64 / 1024.0
    );
    println!(
        "node: {:.1} MiB before, peak growth {node_grow:.1} MiB (goal ≤ 64)",
        rss_before.1 as f64 / 1024.0
    );
    println!("\n## the node's watch");
    println!(
        "sync reconnects during the flood: {} (goal 0); SMS's watch streams after: {streams}",
        reconnects_after - reconnects_before
    );
}
