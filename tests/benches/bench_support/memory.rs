//! Resident memory of the real `sms` binary per idle watch stream, one HTTP/2
//! connection per stream as real nodes have. Baseline: the same SMS with no
//! streams, and with the streams multiplexed over few connections.

use std::time::Duration;

use futures::StreamExt;
use spear_tests::procs::{SmsOptions, SmsProc};

use super::clients::{connect, watch};
use super::stats::rss_kib;

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
