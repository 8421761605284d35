//! Ten times the fleet: 10,000 nodes against the real `sms` binary over
//! mutual TLS, with 10,000 servers registered: one SMS on a one-member
//! etcd (`fleet`), or three replicas on a three-member etcd sharing the
//! nodes evenly (`fleet-replicas`). On this two-core machine the three
//! replicas share CPU 0: their figures show what replication costs, not
//! the speed-up three machines would give.
//!
//! Each bench node is what a node is to SMS: its own certificate
//! (`bench-K`), its own loopback address (127.1.x.y, so SMS's per-source
//! admission sees 10,000 sources, as it would see 10,000 hosts), one
//! HTTP/2 connection with a node's keepalive settings, and on it one
//! follow stream (`Registry.Follow`) that carries its report when it
//! opens and again after every change it applies, as a node's does.
//! What the bench shares that real nodes do not: one process and one core
//! (CPU 1) for all of them, so client-side decryption and scheduling add
//! to every latency measured here; SMS has CPU 0 to itself.
//!
//! In order, each against a baseline from the same run:
//! 1. one change reaching every stream (baseline: one stream open), and
//!    SMS's CPU for it, the 10,000 reports that follow it included;
//! 2. SMS's resident memory per idle stream (baseline: SMS before the
//!    streams opened);
//! 3. SMS's CPU for the nodes' liveness: every stream open while nothing
//!    changes (progress frames, keepalives; two progress intervals), against SMS with no node
//!    for as long; and, for comparison, the heartbeat calls nodes made
//!    before the follow stream, every 5 s on the same connections;
//! 4. the time until every node has its stream back after SMS (replica 0)
//!    restarts (full TLS handshakes; the history is in etcd, so they
//!    resume).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_identity::{dial, Identity};
use spear_proto::defaults::HEARTBEAT_EVERY;
use spear_proto::v1::admin_client::AdminClient;
use spear_proto::v1::UpsertServerRequest;
use spear_tests::history::sms_registry_async_as;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use super::cpu::pin_process;
use super::cpu_time::{busy, clock_ticks_per_second, cpu_ticks, own_ticks};
use super::fleet_plane::{Plane, SERVERS};
use super::stats::Summary;
use super::tls::BenchCerts;

mod node;

use node::{node, Fleet};

const NODES: usize = 10_000;

/// [`NODES`], or `SPEAR_FLEET_NODES` for a quick look on a small fleet
/// (recorded figures are at 10,000).
fn fleet_size() -> usize {
    std::env::var("SPEAR_FLEET_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(NODES)
}

const CHANGES: usize = 20;
/// How long the CPU windows with nothing periodic in them last.
const CPU_WINDOW: Duration = Duration::from_secs(30);
/// The liveness window: two of SMS's progress intervals (60 s by
/// default). The streams open within seconds of each other, so their
/// frames and pings come in bands; a window shorter than the interval
/// catches a band or misses it (0.4 % and 3.0 % in two runs of 30 s).
const LIVENESS_WINDOW: Duration = Duration::from_secs(120);
/// What is not counted as liveness: the minute after the streams opened,
/// while SMS takes their first reports and writes each node's record to
/// etcd (32 puts in flight); shown by slice all the same. The slices also
/// showed what the single window hid: bursts of TLS handshakes a minute
/// and a half in, nodes whose connections their own kernel had closed
/// (`spear_identity`'s keepalive, since fixed).
const SETTLE_WINDOW: Duration = Duration::from_secs(60);

/// Shares of a core as "[1.2, 0.9, …]" percent.
fn percents(shares: &[f64]) -> String {
    let each: Vec<String> = shares.iter().map(|s| format!("{:.1}", s * 100.0)).collect();
    format!("[{}]", each.join(", "))
}

/// Runs the fleet against one SMS (`replicas` 1) or several on a
/// three-member etcd, the nodes spread over them evenly.
pub async fn run(replicas: usize) {
    let n = fleet_size();
    let plane_name = match replicas {
        1 => "one sms binary on a one-member etcd".to_string(),
        n => format!("{n} sms replicas on a three-member etcd, all on CPU 0"),
    };
    println!(
        "\n## ten times the fleet: {n} nodes over mutual TLS, {SERVERS} servers, {plane_name}"
    );
    let certs = tokio::task::block_in_place(|| BenchCerts::new(n));
    let admin = certs.admin.clone();
    let plane = tokio::task::block_in_place(|| Plane::start(replicas, &certs));
    let mut position = (0, 0);
    for sms in &plane.replicas {
        position = wait_servers(&sms.grpc, &admin).await;
    }
    let (epoch, revision) = position;
    let (tx, mut arrivals) = mpsc::unbounded_channel();
    let fleet = Arc::new(Fleet {
        sms: plane.replicas.iter().map(|sms| sms.grpc.clone()).collect(),
        certs,
        positions: (0..n)
            .map(|_| (AtomicU64::new(epoch), AtomicU64::new(revision)))
            .collect(),
        watches: (0..n).map(|_| AtomicU64::new(0)).collect(),
        beating: AtomicBool::new(false),
        failed_connects: AtomicU64::new(0),
        failed_follows: AtomicU64::new(0),
        arrivals: tx,
    });
    let mut admin_client = admin_client(&plane.replicas[0].grpc, &admin).await;
    let everyone: Vec<usize> = (0..n).collect();

    // `SPEAR_FLEET_QUICK`: only the opening and the restart (a diagnosis;
    // recorded figures run everything).
    let quick = std::env::var_os("SPEAR_FLEET_QUICK").is_some();

    // 1. Propagation, baseline: one node.
    let (mut baseline, mut nobody) = (None, 0.0);
    if !quick {
        let one = tokio::spawn(node(Arc::clone(&fleet), 0));
        wait_watches(&fleet, &[0], 1).await;
        baseline = Some(propagate(&mut admin_client, &mut arrivals, 1).await);
        one.abort();
        fleet.watches[0].store(0, Ordering::Relaxed);

        // 3, baseline: SMS's CPU with no node.
        tokio::time::sleep(Duration::from_secs(1)).await;
        nobody = plane.cpu_share(CPU_WINDOW).await;
    }
    if let Some(baseline) = baseline {
        println!("one change, 1 stream (baseline):  {baseline}");
    }

    // 2. Memory: every node's stream open, idle.
    let before = plane.rss_kib();
    let (opened, client, sms_ticks) = (Instant::now(), own_ticks(), plane.cpu_ticks());
    let mut nodes: Vec<_> = (1..n)
        .map(|k| tokio::spawn(node(Arc::clone(&fleet), k)))
        .collect();
    nodes.push(tokio::spawn(node(Arc::clone(&fleet), 0)));
    wait_watches(&fleet, &everyone, 1).await;
    println!(
        "{n} streams opened in {:.1} s (a TLS handshake each); meanwhile the bench nodes' process: {}; SMS: {}",
        opened.elapsed().as_secs_f64(),
        busy(own_ticks() - client, opened),
        busy(plane.cpu_ticks() - sms_ticks, opened)
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = plane.rss_kib();
    println!(
        "SMS RSS {before} KiB with no stream -> {after} KiB with {n}: {:.1} KB per idle stream",
        (after.saturating_sub(before)) as f64 * 1024.0 / n as f64 / 1000.0
    );
    while arrivals.try_recv().is_ok() {}

    if !quick {
        liveness_and_changes(&plane, &fleet, &mut admin_client, &mut arrivals, nobody).await;
    }

    // 4. Reconnect after a restart (of replica 0, with its share of nodes).
    let mut plane = plane;
    let mut sms = plane.replicas.remove(0);
    tokio::task::block_in_place(|| sms.proc.stop());
    let (started, client) = (Instant::now(), own_ticks());
    let failed = (
        fleet.failed_connects.load(Ordering::Relaxed),
        fleet.failed_follows.load(Ordering::Relaxed),
    );
    let restarted = tokio::task::block_in_place(|| sms.restart());
    pin_process(restarted.proc.pid().unwrap_or(0), 0);
    let ready = started.elapsed();
    let its_nodes: Vec<usize> = (0..n).filter(|k| k % replicas == 0).collect();
    let (reconnected, milestones) = wait_watches_timed(&fleet, &its_nodes, 2, started).await;
    println!(
        "SMS restarted: {reconnected}/{} nodes had their stream back {:.2} s after the restart began (process start, their TLS handshakes, resumed from etcd's history); meanwhile the bench nodes' process: {}; SMS (since its start): {}",
        its_nodes.len(),
        started.elapsed().as_secs_f64(),
        busy(own_ticks() - client, started),
        busy(cpu_ticks(restarted.proc.pid().unwrap_or(0)), started)
    );
    println!(
        "  how it went: SMS ready {:.2} s after the restart began; half the nodes back at {}; failed connection attempts {}, refused follow calls {}",
        ready.as_secs_f64(),
        milestones,
        fleet.failed_connects.load(Ordering::Relaxed) - failed.0,
        fleet.failed_follows.load(Ordering::Relaxed) - failed.1,
    );
    for task in nodes {
        task.abort();
    }
    drop(restarted);
}

/// Steps 3 and 1 (continued) of the module's list: SMS's CPU for the
/// fleet's liveness, one change to every stream, and the heartbeat calls
/// for comparison.
async fn liveness_and_changes(
    plane: &Plane,
    fleet: &Fleet,
    admin_client: &mut AdminClient<Channel>,
    arrivals: &mut mpsc::UnboundedReceiver<(u64, Instant)>,
    nobody: f64,
) {
    let n = fleet.watches.len();
    // 3. Liveness: SMS's CPU with every stream open and nothing changing,
    // once the opening's tail (the nodes' first reports, their records
    // written to etcd) is over; both shown by 10 s slice.
    let settling = plane.cpu_slices(SETTLE_WINDOW).await;
    let slices = plane.cpu_slices(LIVENESS_WINDOW).await;
    let idle = slices.iter().sum::<f64>() / slices.len().max(1) as f64;
    println!(
        "SMS CPU by 10 s slice, % of one core: the first {} s after the streams opened (not counted) {}; the next {} s (liveness) {}",
        SETTLE_WINDOW.as_secs(),
        percents(&settling),
        LIVENESS_WINDOW.as_secs(),
        percents(&slices)
    );
    println!(
        "SMS CPU with no node (baseline): {:.2}% of one core; with {n} nodes following, nothing changing: {:.2}% (their liveness: {:.2}%)",
        nobody * 100.0,
        idle * 100.0,
        (idle - nobody) * 100.0
    );

    // 1, continued: one change to every node, and what it cost SMS beyond
    // its idle work.
    let (ticks, started) = (plane.cpu_ticks(), Instant::now());
    let many = propagate(admin_client, arrivals, n).await;
    let spent = (plane.cpu_ticks() - ticks) as f64 / clock_ticks_per_second();
    let for_changes = spent - idle * started.elapsed().as_secs_f64();
    println!("one change, {n} streams:       {many}");
    println!(
        "SMS CPU per change to {n} streams, beyond its idle work (the {n} reports that follow it included): {:.1} ms",
        for_changes * 1000.0 / CHANGES as f64
    );

    // 3, for comparison: heartbeat calls, as nodes made before.
    fleet.beating.store(true, Ordering::Relaxed);
    tokio::time::sleep(HEARTBEAT_EVERY).await;
    let beating = plane.cpu_share(CPU_WINDOW).await;
    fleet.beating.store(false, Ordering::Relaxed);
    println!(
        "for comparison, the heartbeat calls nodes made before the follow stream, every {HEARTBEAT_EVERY:?} on the same connections: {:.2}% of one core (the calls: {:.2}%)",
        beating * 100.0,
        (beating - idle) * 100.0
    );
}

/// Commits CHANGES changes, one at a time, and returns the commit-to-
/// arrival latency at every one of `streams` streams.
async fn propagate(
    admin: &mut AdminClient<Channel>,
    arrivals: &mut mpsc::UnboundedReceiver<(u64, Instant)>,
    streams: usize,
) -> Summary {
    let mut sent = std::collections::HashMap::new();
    let mut samples = Vec::with_capacity(streams * CHANGES);
    for i in 0..CHANGES {
        let spec = serde_json::json!({"id": "bench-change", "command": "true", "description": format!("change {i}")});
        let started = Instant::now();
        let answer = admin
            .upsert_server(UpsertServerRequest {
                spec_json: spec.to_string(),
            })
            .await
            .unwrap_or_else(|e| panic!("upsert: {e}"))
            .into_inner();
        sent.insert(answer.revision, started);
        // Let the change reach everyone before the next one.
        let deadline = Instant::now() + Duration::from_secs(10);
        let wanted = (i + 1) * streams;
        while samples.len() < wanted && Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_secs(1), arrivals.recv()).await {
                Ok(Some((revision, at))) => {
                    if let Some(start) = sent.get(&revision) {
                        samples.push(at.saturating_duration_since(*start));
                    }
                }
                _ => {}
            }
        }
    }
    assert_eq!(
        samples.len(),
        streams * CHANGES,
        "every stream must see every change"
    );
    Summary::of(samples)
}

/// Waits until every node in `which` had its watch accepted `times`
/// times; how many had.
async fn wait_watches(fleet: &Fleet, which: &[usize], times: u64) -> usize {
    wait_watches_timed(fleet, which, times, Instant::now())
        .await
        .0
}

/// [`wait_watches`], noting when half, 90 %, 99 % and all of `which`
/// got there, in seconds since `since`: "5.1 s, 90 % at 7.9 s, …".
async fn wait_watches_timed(
    fleet: &Fleet,
    which: &[usize],
    times: u64,
    since: Instant,
) -> (usize, String) {
    let deadline = Instant::now() + Duration::from_secs(300);
    let marks = [0.5, 0.9, 0.99, 1.0];
    let mut reached = Vec::new();
    loop {
        let done = which
            .iter()
            .filter(|&&k| fleet.watches[k].load(Ordering::Relaxed) >= times)
            .count();
        while reached.len() < marks.len()
            && done as f64 >= marks[reached.len()] * which.len() as f64
        {
            reached.push(since.elapsed().as_secs_f64());
        }
        if done == which.len() || Instant::now() >= deadline {
            let shown: Vec<String> = reached
                .iter()
                .zip(["", "90 % at ", "99 % at ", "all at "])
                .map(|(t, label)| format!("{label}{t:.2} s"))
                .collect();
            return (done, shown.join(", "));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn admin_client(sms: &str, admin: &spear_tests::certs::TlsSet) -> AdminClient<Channel> {
    let tls = admin.identity().unwrap_or_else(|e| panic!("{e}"));
    let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap_or_else(|e| panic!("{e}"));
    let channel = dialer
        .connect(endpoint)
        .await
        .unwrap_or_else(|e| panic!("admin connect: {e}"));
    AdminClient::new(channel)
}

/// Waits until SMS holds every server; its position then.
async fn wait_servers(sms: &str, admin: &spear_tests::certs::TlsSet) -> (u64, u64) {
    for _ in 0..3000 {
        if let Ok((epoch, revision, servers)) = sms_registry_async_as(sms, Some(admin)).await {
            if servers.len() >= SERVERS {
                return (epoch, revision);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("SMS never registered {SERVERS} servers");
}
