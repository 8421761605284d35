//! 1,000 streams reconnecting after an SMS restart. With etcd the history
//! survives, so streams resume with deltas; with the embedded store the epoch
//! changes and every stream needs a snapshot (the baseline).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use spear_tests::certs::TlsSet;
use spear_tests::etcd::EtcdServer;
use spear_tests::history::sms_registry_async_as;
use spear_tests::procs::{SmsOptions, SmsProc};

use super::clients::{try_connect_as, watch, Position};
use super::tls::BenchCerts;

const STREAMS: usize = 1_000;
const SERVERS: usize = 1_000;
const CHANGES_WHILE_DOWN: usize = 5;

pub async fn run() {
    println!("\n## reconnect storm: {STREAMS} streams, {SERVERS} servers, SMS restarted");
    storm(false, None).await;
    storm(true, None).await;
}

/// The embedded-store storm with every stream on its own mutual-TLS
/// connection (a full handshake each, after the restart), against the
/// plaintext storm in the same run. Four streams share a node identity.
pub async fn run_tls() {
    println!("\n## reconnect storm, TLS vs plaintext: {STREAMS} streams, {SERVERS} servers, embedded store, SMS restarted");
    let certs = BenchCerts::new(STREAMS / 4);
    storm(false, None).await;
    storm(false, Some(&certs)).await;
}

async fn storm(with_etcd: bool, certs: Option<&BenchCerts>) {
    let admin: Option<TlsSet> = certs.map(|c| c.admin.clone());
    let etcd = with_etcd.then(EtcdServer::start);
    let mcp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write_servers(mcp.path(), 0);
    let options = SmsOptions {
        mcp_dir: Some(mcp.path().to_path_buf()),
        etcd: etcd.as_ref().map(|e| e.endpoint()),
        tls: certs.map(|c| c.sms.clone()),
        client_tls: admin.clone(),
        ..Default::default()
    };
    let sms = SmsProc::start(options);
    let addr = sms.grpc.clone();
    wait_servers(&addr, SERVERS, admin.as_ref()).await;

    let positions: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..STREAMS)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let snapshots = Arc::new(AtomicU64::new(0));
    let deltas = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..STREAMS {
        let (addr, positions, snapshots, deltas) = (
            addr.clone(),
            Arc::clone(&positions),
            Arc::clone(&snapshots),
            Arc::clone(&deltas),
        );
        let tls = certs.map(|c| c.node(i / 4).clone());
        let node = if tls.is_some() { i / 4 } else { i };
        tasks.push(tokio::spawn(async move {
            // As a node does (spearlet/src/sync/client.rs): after any failure
            // or end of stream, wait as the node's `Retry` says; reset it
            // once an event applies.
            let mut position = Position::default();
            let mut retry = spearlet::sync::Retry::default();
            loop {
                let mut refused = false;
                let stream = match try_connect_as(&addr, tls.as_ref()).await {
                    Ok(channel) => watch(channel, node, position.epoch, position.revision)
                        .await
                        .ok(),
                    Err(e) => {
                        refused = spearlet::sms_link::nobody_listening(&e);
                        None
                    }
                };
                if let Some(mut stream) = stream {
                    while let Some(Ok(event)) = stream.next().await {
                        let snapshots_before = position.snapshots;
                        if position.apply(event).is_none() {
                            continue;
                        }
                        retry.reset();
                        if position.snapshots > snapshots_before {
                            snapshots.fetch_add(1, Ordering::Relaxed);
                        } else {
                            deltas.fetch_add(1, Ordering::Relaxed);
                        }
                        positions[i].0.store(position.epoch, Ordering::Relaxed);
                        positions[i].1.store(position.revision, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(retry.next_delay(refused)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut sms = sms;
    // Process control blocks; keep the runtime's workers free for the clients.
    tokio::task::block_in_place(|| sms.proc.stop());
    let restarted;
    if with_etcd {
        // Writes while SMS is down, by another replica on the same etcd.
        tokio::task::block_in_place(|| {
            let other = SmsProc::start(SmsOptions {
                etcd: etcd.as_ref().map(|e| e.endpoint()),
                ..Default::default()
            });
            for i in 0..CHANGES_WHILE_DOWN {
                let spec = other.workdir().join("spec.json");
                let body =
                    serde_json::json!({"id": format!("down-{i}"), "command": "true"}).to_string();
                std::fs::write(&spec, body).unwrap_or_else(|e| panic!("{e}"));
                let (code, _, err) = other.client(&["apply", &spec.to_string_lossy()]);
                assert_eq!(code, 0, "{err}");
            }
        });
        snapshots.store(0, Ordering::Relaxed);
        deltas.store(0, Ordering::Relaxed);
        let started = Instant::now();
        restarted = tokio::task::block_in_place(|| sms.restart());
        let (epoch, revision, _) = sms_registry_async_as(&restarted.grpc, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        report(
            "etcd (history kept)",
            started,
            (epoch, revision),
            &positions,
            &snapshots,
            &deltas,
        )
        .await;
    } else {
        snapshots.store(0, Ordering::Relaxed);
        deltas.store(0, Ordering::Relaxed);
        let started = Instant::now();
        restarted = tokio::task::block_in_place(|| sms.restart());
        wait_servers(&restarted.grpc, SERVERS, admin.as_ref()).await;
        let (epoch, revision, _) = sms_registry_async_as(&restarted.grpc, admin.as_ref())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let label = match certs {
            Some(_) => "embedded, mutual TLS (full handshakes)",
            None => "embedded (new epoch, baseline)",
        };
        report(
            label,
            started,
            (epoch, revision),
            &positions,
            &snapshots,
            &deltas,
        )
        .await;
    }
    for task in tasks {
        task.abort();
    }
    drop(restarted);
}

/// Waits until every stream holds SMS's `target` position and reports how long that took.
async fn report(
    label: &str,
    started: Instant,
    target: (u64, u64),
    positions: &[(AtomicU64, AtomicU64)],
    snapshots: &AtomicU64,
    deltas: &AtomicU64,
) {
    let converged = || {
        positions
            .iter()
            .filter(|(e, r)| {
                e.load(Ordering::Relaxed) == target.0 && r.load(Ordering::Relaxed) >= target.1
            })
            .count()
    };
    let deadline = started + Duration::from_secs(60);
    while converged() < STREAMS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let converged = converged();
    println!(
        "{label}: {converged}/{STREAMS} streams converged {:.2} s after the restart began; {} snapshots, {} deltas received",
        started.elapsed().as_secs_f64(),
        snapshots.load(Ordering::Relaxed),
        deltas.load(Ordering::Relaxed)
    );
}

fn write_servers(dir: &std::path::Path, version: usize) {
    let servers: serde_json::Map<String, serde_json::Value> = (0..SERVERS)
        .map(|i| {
            (
                format!("s{i:04}"),
                serde_json::json!({"command": "true", "description": format!("v{version}")}),
            )
        })
        .collect();
    let body = serde_json::json!({ "mcpServers": servers }).to_string();
    std::fs::write(dir.join("servers.json"), body).unwrap_or_else(|e| panic!("{e}"));
}

async fn wait_servers(addr: &str, n: usize, tls: Option<&TlsSet>) {
    for _ in 0..500 {
        if let Ok((_, _, servers)) = sms_registry_async_as(addr, tls).await {
            if servers.len() >= n {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("SMS never registered {n} servers");
}
