//! A full snapshot of 10,000 servers asked for by 1,000 streams at once:
//! encoded once, shared by all. Baseline: encoding it per stream.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use prost::Message;
use spear_proto::v1::ListServersResponse;

use super::clients::{connect, watch, Position};
use super::{preload, start_sms, Backend, Summary};

const SERVERS: usize = 10_000;
const STREAMS: usize = 1_000;
const STREAMS_PER_CONNECTION: usize = 10;

pub async fn run() {
    let sms = start_sms(Backend::Memory).await;
    preload(&sms.writer, SERVERS).await;
    println!("\n## snapshot of {SERVERS} servers to {STREAMS} streams");

    // Baseline: what per-stream encoding would cost (encode only).
    let list = sms
        .hub
        .with_servers(|epoch, revision, view| ListServersResponse {
            epoch,
            revision,
            servers: view.iter().cloned().collect(),
        });
    let started = Instant::now();
    let mut bytes = 0usize;
    for _ in 0..STREAMS {
        bytes += list.encode_to_vec().len();
    }
    let per_stream_encode = started.elapsed();
    println!(
        "baseline, encoding per stream: {:.0} ms for {STREAMS} encodes ({:.1} MB each)",
        per_stream_encode.as_secs_f64() * 1000.0,
        bytes as f64 / STREAMS as f64 / 1e6
    );

    let encodes_before = sms.hub.stats.snapshot_encodes.load(Ordering::Relaxed);
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut channel = None;
    for i in 0..STREAMS {
        if i % STREAMS_PER_CONNECTION == 0 {
            channel = Some(connect(&sms.sms_addr).await);
        }
        let Some(ch) = channel.clone() else { continue };
        tasks.push(tokio::spawn(async move {
            let mut stream = watch(ch, i, 0, 0)
                .await
                .unwrap_or_else(|e| panic!("watch: {e}"));
            let mut position = Position::default();
            while let Some(Ok(event)) = stream.next().await {
                if position.apply(event).is_some() {
                    return started.elapsed();
                }
            }
            panic!("stream ended before its snapshot");
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        if let Ok(Ok(d)) = tokio::time::timeout(Duration::from_secs(120), task).await {
            samples.push(d);
        }
    }
    let encodes = sms.hub.stats.snapshot_encodes.load(Ordering::Relaxed) - encodes_before;
    println!(
        "time for each stream to hold the whole snapshot: {}",
        Summary::of(samples)
    );
    println!("snapshot encodes for {STREAMS} streams at one revision: {encodes}");
    assert_eq!(encodes, 1, "the snapshot must be encoded once per revision");
}
