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
/// The TLS comparison takes more changes: its p99 is about the slowest few
/// changes, which 30 leave to chance on a small machine.
const TLS_CHANGES: usize = 150;

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
/// identity per connection.
pub async fn run_tls() {
    let certs = BenchCerts::new(STREAMS / STREAMS_PER_CONNECTION);
    let plain = start_sms_with(Backend::Memory, None).await;
    let tls = start_sms_with(Backend::Memory, Some(certs.sms_identity())).await;
    preload(&plain.writer, SERVERS).await;
    preload(&tls.writer, SERVERS).await;
    println!("\n## propagation, TLS vs plaintext (Memory store, {SERVERS} servers, {STREAMS} streams, {STREAMS_PER_CONNECTION}/connection, {TLS_CHANGES} changes)");
    let baseline = measure(&plain, STREAMS, None, TLS_CHANGES).await;
    println!("plaintext (baseline): {baseline}");
    let secure = measure(&tls, STREAMS, Some(&certs), TLS_CHANGES).await;
    println!("mutual TLS:           {secure}");
}

/// Opens `streams` up-to-date streams, commits CHANGES changes one at a time
/// and returns the commit-to-receive latency of every (stream, change).
async fn measure(
    sms: &super::InProcess,
    streams: usize,
    certs: Option<&BenchCerts>,
    changes: usize,
) -> Summary {
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
    Summary::of(samples)
}
