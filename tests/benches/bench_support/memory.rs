//! Resident memory of the real `sms` binary per idle watch stream, one HTTP/2
//! connection per stream as real nodes have. Baseline: the same SMS with no
//! streams, and with the streams multiplexed over few connections; with
//! TLS, plaintext in the same run.

use std::time::Duration;

use futures::StreamExt;
use spear_tests::procs::{SmsOptions, SmsProc};

use super::clients::{connect_as, watch};
use super::stats::rss_kib;
use super::tls::BenchCerts;

const STREAMS: usize = 1_000;
/// A node identity may hold this many watch streams.
const STREAMS_PER_IDENTITY: usize = 4;

pub async fn run() {
    println!("\n## memory per idle watch stream (real sms binary)");
    for per_connection in [1usize, 100] {
        let sms = SmsProc::start(SmsOptions::default());
        let label = format!("{STREAMS} idle streams, {per_connection} per connection");
        idle_streams(&sms, per_connection, None, &label).await;
    }
}

/// The same with mutual TLS, one stream per connection as nodes have it,
/// against plaintext in the same run; four connections share each node
/// identity.
pub async fn run_tls() {
    println!("\n## memory per idle watch stream, TLS vs plaintext (real sms binary, 1 stream per connection)");
    let certs = BenchCerts::new(STREAMS / STREAMS_PER_IDENTITY);
    for tls in [false, true] {
        let sms = SmsProc::start(SmsOptions {
            tls: tls.then(|| certs.sms.clone()),
            client_tls: tls.then(|| certs.admin.clone()),
            ..Default::default()
        });
        let label = if tls {
            "mutual TLS"
        } else {
            "plaintext (baseline)"
        };
        idle_streams(&sms, 1, tls.then_some(&certs), label).await;
    }
}

/// Opens STREAMS idle streams on `sms`, `per_connection` to a connection
/// (with `certs`, over TLS as node identity i / 4), and prints the RSS each
/// added. The pauses let the process settle before each reading.
async fn idle_streams(
    sms: &SmsProc,
    per_connection: usize,
    certs: Option<&BenchCerts>,
    label: &str,
) {
    let pid = sms.proc.pid().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let mut held = Vec::new();
    let mut channel = None;
    for i in 0..STREAMS {
        let identity = i / STREAMS_PER_IDENTITY;
        if i % per_connection == 0 {
            channel = Some(connect_as(&sms.grpc, certs.map(|c| c.node(identity))).await);
        }
        let Some(ch) = channel.clone() else { continue };
        let node = if certs.is_some() { identity } else { i };
        let mut stream = watch(ch, node, 0, 0)
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
        "{label}: RSS {before} KiB -> {after} KiB, {:.1} KB per stream",
        per_stream / 1000.0
    );
}
