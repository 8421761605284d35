//! Propagation of one change to 1,000 watch streams with 10,000 servers
//! registered. Baseline: the same change to a single stream, same run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::clients::{connect_as, watch, Position};
use super::tls::BenchCerts;
use super::{preload, record, start_sms_with, Backend, Summary};

use spear_sms::store::Change;

const SERVERS: usize = 10_000;
const STREAMS: usize = 1_000;
const STREAMS_PER_CONNECTION: usize = 10;
const CHANGES: usize = 30;
/// The TLS comparison alternates plaintext and TLS rounds of CHANGES each,
/// so a slow moment of the machine falls on both sides alike, and pools
/// each side's samples: its p99 is about the slowest few changes, which
/// one round of 30 leaves to chance.
const TLS_ROUNDS: usize = 5;

pub async fn run(backend: Backend) {
    let sms = start_sms_with(backend, None).await;
    preload(&sms.writer, SERVERS).await;
    println!("\n## propagation ({backend:?} store, {SERVERS} servers)");
    let baseline = measure(&sms, 1, None, CHANGES).await;
    println!("baseline, 1 stream:        {baseline}");
    let many = measure(&sms, STREAMS, None, CHANGES).await;
    println!("{STREAMS} streams ({STREAMS_PER_CONNECTION}/connection): {many}");
}

/// The same with mutual TLS, against plaintext in the same run: one node
/// identity per connection. SMS runs on CPU 0 and the clients (this
/// runtime, see `registry.rs`) on CPU 1, as nodes run on other machines:
/// otherwise the clients' own decryption lands on SMS's cores.
pub async fn run_tls() {
    let certs = BenchCerts::new(STREAMS / STREAMS_PER_CONNECTION);
    let sms_identity = certs.sms_identity();
    let (plain, tls) = tokio::task::spawn_blocking(move || {
        (
            super::start_sms_pinned(None),
            super::start_sms_pinned(Some(sms_identity)),
        )
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    preload(&plain.writer, SERVERS).await;
    preload(&tls.writer, SERVERS).await;
    println!("\n## propagation, TLS vs plaintext (Memory store, {SERVERS} servers, {STREAMS} streams, {STREAMS_PER_CONNECTION}/connection, {TLS_ROUNDS} alternating rounds of {CHANGES} changes)");
    let (mut baseline, mut secure) = (Vec::new(), Vec::new());
    for _ in 0..TLS_ROUNDS {
        baseline.extend(samples(&plain, STREAMS, None, CHANGES).await);
        secure.extend(samples(&tls, STREAMS, Some(&certs), CHANGES).await);
    }
    println!("plaintext (baseline): {}", Summary::of(baseline));
    println!("mutual TLS:           {}", Summary::of(secure));
}

/// [`samples`], summarised.
async fn measure(
    sms: &super::InProcess,
    streams: usize,
    certs: Option<&BenchCerts>,
    changes: usize,
) -> Summary {
    Summary::of(samples(sms, streams, certs, changes).await)
}

/// Opens `streams` up-to-date streams, commits `changes` changes one at a
/// time and returns the commit-to-receive latency of every (stream, change).
async fn samples(
    sms: &super::InProcess,
    streams: usize,
    certs: Option<&BenchCerts>,
    changes: usize,
) -> Vec<Duration> {
    let (epoch, revision) = sms.hub.position();
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Instant)>();
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<()>();
    let mut tasks = Vec::new();
    let mut channel = None;
    for i in 0..streams {
        let conn = i / STREAMS_PER_CONNECTION;
        if i % STREAMS_PER_CONNECTION == 0 {
            channel = Some(connect_as(&sms.sms_addr, certs.map(|c| c.node(conn))).await);
        }
        let Some(ch) = channel.clone() else { continue };
        // With TLS the watch names the connection's node identity.
        let node = if certs.is_some() { conn } else { i };
        let tx = tx.clone();
        let ready = ready_tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = match watch(ch, node, epoch, revision).await {
                Ok(s) => s,
                Err(e) => panic!("watch: {e}"),
            };
            let mut position = Position {
                epoch,
                revision,
                ..Default::default()
            };
            let mut announced = false;
            while let Some(Ok(event)) = stream.next().await {
                if !announced {
                    announced = true;
                    let _ = ready.send(());
                }
                if let Some(rev) = position.apply(event) {
                    let _ = tx.send((rev, Instant::now()));
                }
            }
        }));
    }
    for _ in 0..streams {
        ready_rx.recv().await;
    }
    let sent: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    for i in 0..changes {
        let started = Instant::now();
        let upsert = record("bench-change", &format!("change {i}"));
        let rev = sms
            .writer
            .apply(|_| {
                Ok::<_, ()>(Change {
                    upserts: vec![upsert.clone()],
                    deletes: vec![],
                })
            })
            .await
            .unwrap_or_else(|e| panic!("commit: {e:?}"));
        sent.lock().insert(rev, started);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let mut samples = Vec::with_capacity(streams * changes);
    let deadline = Instant::now() + Duration::from_secs(60);
    while samples.len() < streams * changes && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some((rev, at))) => {
                if let Some(start) = sent.lock().get(&rev) {
                    samples.push(at.saturating_duration_since(*start));
                }
            }
            _ => break,
        }
    }
    for task in tasks {
        task.abort();
    }
    assert_eq!(
        samples.len(),
        streams * changes,
        "every stream must see every change"
    );
    samples
}
