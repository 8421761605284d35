//! The console at scale (`cargo bench -p spear-tests --bench console`;
//! build the release binaries first with `cargo build --release --bins`).
//! Issue 28's goal: with 10,000 servers and 1,000 nodes, a page's server
//! time stays ≤ 300 ms.
//!
//! SMS is the real binary, its MCP directory 100 files of 100 servers;
//! 1,000 nodes heartbeat over real gRPC every 5 s, each reporting 10
//! servers. The browser (Debian's chromium, through Playwright) signs in
//! and loads each page `ROUNDS` times; SMS's own time per page comes from
//! its `Server-Timing` header, the browser's from Navigation Timing. The
//! baseline of the same run is the 10-server, 2-node console. Then a
//! file dropped into the MCP directory, timed until its row shows on an
//! open page (the live update).

#[path = "bench_support/stats.rs"]
#[allow(dead_code, unused_imports)]
mod stats;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::{HeartbeatRequest, ServerReport};
use spear_tests::console::drive;
use spear_tests::procs::{require_bins, SmsOptions, SmsProc};
use spear_tests::tasks::CONSOLE_TOKEN;
use stats::machine;

const ROUNDS: usize = 20;
const FILES: usize = 100;

fn write_servers(dir: &Path, servers: usize) {
    let per_file = servers.div_ceil(FILES).max(1);
    for file in 0..FILES.min(servers) {
        let mut map = serde_json::Map::new();
        for k in 0..per_file {
            let n = file * per_file + k;
            if n >= servers {
                break;
            }
            map.insert(
                format!("srv-{n:05}"),
                json!({"command": "mcp-server-example", "args": ["--port", n.to_string()],
                       "description": format!("Example server number {n}, with a description of ordinary length.")}),
            );
        }
        let text = json!({"mcpServers": map}).to_string();
        std::fs::write(dir.join(format!("servers-{file:03}.json")), text)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// `nodes` nodes heartbeating until `stop`.
fn fleet(
    rt: &tokio::runtime::Runtime,
    sms: &str,
    nodes: usize,
    servers: usize,
    stop: Arc<AtomicBool>,
) {
    let addr = format!("http://{sms}");
    for k in 0..nodes {
        let addr = addr.clone();
        let stop = Arc::clone(&stop);
        rt.spawn(async move {
            let Ok(channel) =
                tonic::transport::Endpoint::from_shared(addr).map(|e| e.connect_lazy())
            else {
                return;
            };
            let mut client = NodesClient::new(channel);
            let reports: Vec<ServerReport> = (0..10.min(servers))
                .map(|s| ServerReport {
                    server_id: format!("srv-{:05}", (k * 10 + s) % servers.max(1)),
                    state: "ready".into(),
                    protocol_version: "2025-11-25".into(),
                    tools: 12,
                    held: 0,
                    sandbox: "confined".into(),
                })
                .collect();
            while !stop.load(Ordering::Relaxed) {
                let request = HeartbeatRequest {
                    node_id: format!("node-{k:04}"),
                    version: "bench".into(),
                    applied_epoch: 0,
                    applied_revision: 0,
                    server_total: reports.len() as u32,
                    servers: reports.clone(),
                    ..Default::default()
                };
                let _ = client.heartbeat(request).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
    }
}

fn measure(servers: usize, nodes: usize, rt: &tokio::runtime::Runtime) -> Value {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write_servers(dir.path(), servers);
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().to_path_buf()),
        admin_token: Some(CONSOLE_TOKEN.into()),
        client_presents_token: true,
        ..Default::default()
    });
    // Every file applied.
    spear_tests::wait::eventually("the servers loaded", Duration::from_secs(120), || {
        let status = sms.status();
        (status["servers"].as_u64() == Some(servers as u64))
            .then_some(())
            .ok_or(format!("{}", status["servers"]))
    });
    let stop = Arc::new(AtomicBool::new(false));
    fleet(rt, &sms.grpc, nodes, servers, Arc::clone(&stop));
    spear_tests::wait::eventually("the nodes heard", Duration::from_secs(60), || {
        let status = sms.status();
        let heard = status["nodes"].as_array().map_or(0, Vec::len);
        (heard == nodes).then_some(()).ok_or(format!("{heard}"))
    });
    let middle = format!("/servers/srv-{:05}", servers / 2);
    let node = format!("/nodes/node-{:04}", nodes / 2);
    let pages = [
        "/",
        "/?q=srv-0004",
        "/?page=100",
        &middle,
        "/nodes",
        "/nodes?q=node-09",
        &node,
        "/trust",
        "/audit",
        "/tasks",
    ]
    .join(",");
    let seen = drive(
        "timings",
        &sms,
        &[
            ("PAGES", pages),
            ("ROUNDS", ROUNDS.to_string()),
            ("MCP_DIR", dir.path().display().to_string()),
        ],
    );
    stop.store(true, Ordering::Relaxed);
    seen
}

fn at(sorted: &[Value], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let i = ((n as f64 - 1.0) * q).round() as usize;
    sorted[i].as_f64().unwrap_or(f64::NAN)
}

fn report(name: &str, seen: &Value) {
    let timings = &seen["timings"];
    println!("\n{name}");
    println!(
        "{:<24} {:>10} {:>10} {:>12} {:>12} {:>9}",
        "page", "server p50", "server p99", "response p50", "response p99", "KiB"
    );
    for (page, t) in timings.as_object().into_iter().flatten() {
        let server = t["server_ms"].as_array().cloned().unwrap_or_default();
        let response = t["response_ms"].as_array().cloned().unwrap_or_default();
        println!(
            "{:<24} {:>10.1} {:>10.1} {:>12.1} {:>12.1} {:>9.0}",
            page,
            at(&server, 0.5),
            at(&server, 0.99),
            at(&response, 0.5),
            at(&response, 0.99),
            t["bytes"].as_f64().unwrap_or(0.0) / 1024.0
        );
    }
    let live = seen["live_ms"].as_array().cloned().unwrap_or_default();
    println!(
        "a dropped file on an open page: p50 {:.0} ms, p99 {:.0} ms ({} files)",
        at(&live, 0.5),
        at(&live, 0.99),
        live.len()
    );
}

fn main() {
    require_bins(&["sms"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "console page timings · {} · {ROUNDS} loads per page",
        machine()
    );
    let baseline = measure(10, 2, &rt);
    report("baseline: 10 servers, 2 nodes", &baseline);
    let scale = measure(10_000, 1_000, &rt);
    report("at scale: 10,000 servers, 1,000 nodes", &scale);
}
