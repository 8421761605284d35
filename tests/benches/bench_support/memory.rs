//! Resident memory of the real `sms` binary per idle watch stream, one HTTP/2
//! connection per stream as real nodes have. Baseline: the same SMS with no
//! streams, and with the streams multiplexed over few connections.

use std::time::Duration;

use futures::StreamExt;
use spear_tests::procs::{SmsOptions, SmsProc};

use super::clients::{connect, connect_as, watch};
use super::stats::rss_kib;
use super::tls::BenchCerts;

const STREAMS: usize = 1_000;

pub async fn run() {
    println!("\n## memory per idle watch stream (real sms binary)");
    for per_connection in [1usize, 100] {
        let sms = SmsProc::start(SmsOptions::default());
        let pid = sms.proc.pid().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kib(pid);
        let mut held = Vec::new();
        let mut channel = None;
        for i in 0..STREAMS {
            if i % per_connection == 0 {
                channel = Some(connect(&sms.grpc).await);
            }
            let Some(ch) = channel.clone() else { continue };
            let mut stream = watch(ch, i, 0, 0)
                .await
                .unwrap_or_else(|e| panic!("watch: {e}"));
            // The first frame (an empty snapshot) proves the stream is open.
            let _ = stream.next().await;
            held.push(stream);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = rss_kib(pid);
        let per_stream = (after.saturating_sub(before)) as f64 * 1024.0 / STREAMS as f64;
        println!(
            "{STREAMS} idle streams, {per_connection} per connection: RSS {before} KiB -> {after} KiB, {:.1} KB per stream",
            per_stream / 1000.0
        );
        drop(held);
    }
}

/// The same with mutual TLS, one stream per connection as nodes have it,
/// against plaintext in the same run. A node identity may hold 4 streams,
/// so 4 connections share each identity.
pub async fn run_tls() {
    println!("\n## memory per idle watch stream, TLS vs plaintext (real sms binary, 1 stream per connection)");
    let certs = BenchCerts::new(STREAMS / 4);
    for tls in [false, true] {
        let sms = SmsProc::start(SmsOptions {
            tls: tls.then(|| certs.sms.clone()),
            client_tls: tls.then(|| certs.admin.clone()),
            ..Default::default()
        });
        let pid = sms.proc.pid().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kib(pid);
        let mut held = Vec::new();
        for i in 0..STREAMS {
            let identity = i / 4;
            let channel = connect_as(&sms.grpc, tls.then(|| certs.node(identity))).await;
            let node = if tls { identity } else { i };
            let mut stream = watch(channel, node, 0, 0)
                .await
                .unwrap_or_else(|e| panic!("watch: {e}"));
            let _ = stream.next().await;
            held.push(stream);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = rss_kib(pid);
        let per_stream = (after.saturating_sub(before)) as f64 * 1024.0 / STREAMS as f64;
        let label = if tls {
            "mutual TLS"
        } else {
            "plaintext (baseline)"
        };
        println!(
            "{label}: {STREAMS} idle streams: RSS {before} KiB -> {after} KiB, {:.1} KB per stream",
            per_stream / 1000.0
        );
        drop(held);
    }
}
