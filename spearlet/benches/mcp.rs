//! Node MCP layer benchmarks (`cargo bench -p spearlet --bench mcp`).
//!
//! - `overhead`: a tool call through the node path (resolve the offered
//!   name, re-check policy, pooled connection, render) against a direct rmcp
//!   call to the same kind of stdio server, interleaved in one run;
//! - `overhead-http`: the same over Streamable HTTP, the transport of
//!   remote servers and of the gateways people compare with;
//! - `throughput`: calls per second to one server at concurrency 8;
//! - `toolset`: building the tool list of a request from 50 servers x 20 tools;
//! - `memory`: resident memory of the node per idle connection;
//! - `pins`: a call to a pinned tool (checked against its pin) against
//!   one to a server with `"pin": "off"`, alternating in one run;
//! - `audit`: a call with the audit trail on against one with it off, the
//!   wait for records to be on disk, and sustained records per second;
//! - `quotas`: a call of a task with a task and a server quota against one
//!   with quotas off, alternating in one run, and the node's check alone;
//! - `sandbox`: launching a process, starting a server and a call, each
//!   confined against unconfined, alternating in one run.
//!
//! The stdio server is `server-everything` (npm, installed by scripts/setup.sh).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use spear_proto::v1::{ServerSpec, Transport};
use spearlet::connections::Connections;
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::{SessionPolicy, TaskPolicy};
use spearlet::tools::Router;

#[path = "support/audit_cost.rs"]
mod audit_cost;
#[path = "support/pin_cost.rs"]
mod pin_cost;
#[path = "support/quota_cost.rs"]
mod quota_cost;
#[path = "support/sandbox_cost.rs"]
mod sandbox_cost;

fn everything() -> String {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let path = format!("{home}/.cache/spear/npm/node_modules/.bin/mcp-server-everything");
    if !std::path::Path::new(&path).exists() {
        // One line, not a panic: this is what to run.
        eprintln!("{path} is missing: run scripts/setup.sh (it installs the npm MCP servers)");
        std::process::exit(2);
    }
    path
}

fn misbehaving() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/misbehaving_server.py"
    )
    .to_string()
}

fn spec(id: &str, command: &str, args: &[&str]) -> ServerSpec {
    ServerSpec {
        id: id.into(),
        transport: Transport::Stdio as i32,
        command: command.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        enabled: true,
        ..Default::default()
    }
}

fn registry(specs: Vec<ServerSpec>) -> RegistryHandle {
    RegistryHandle::new(RegistryView::from_specs(specs))
}

fn policies(servers: &[String]) -> (TaskPolicy, SessionPolicy) {
    let task = TaskPolicy {
        enabled: true,
        allowed_server_ids: servers.to_vec(),
        default_server_ids: servers.to_vec(),
        tool_allowlist: None,
        tool_denylist: vec!["never_*".into()],
        approval: Vec::new(),
    };
    let session = SessionPolicy::from_task(&task);
    (task, session)
}

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The node path against a direct rmcp client, both to server-everything
/// over stdio, interleaved in one run.
async fn overhead() {
    // Direct: rmcp's client on a child process we spawn plainly.
    let mut child = tokio::process::Command::new(everything())
        .arg("stdio")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("no pipes")
    };
    let direct = ().serve((stdout, stdin)).await.unwrap_or_else(|e| panic!("initialize: {e}"));
    let node = spec("everything", &everything(), &["stdio"]);
    compare("stdio", direct, node).await;
}

/// The same over Streamable HTTP: one server-everything in its HTTP mode,
/// a direct rmcp HTTP client and the node's connection both calling it.
async fn overhead_http() {
    let port = free_port();
    let _server = tokio::process::Command::new(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "server-everything never listened on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.clone());
    let direct = ().serve(transport).await.unwrap_or_else(|e| panic!("initialize: {e}"));
    let node = ServerSpec {
        id: "everything".into(),
        transport: Transport::StreamableHttp as i32,
        url,
        enabled: true,
        ..Default::default()
    };
    compare("Streamable HTTP", direct, node).await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("free port: {e}"))
}

/// `echo` CALLS times through `direct` and through the node path to
/// `node`, interleaved; prints both and what the node adds.
async fn compare(
    transport: &str,
    direct: rmcp::service::RunningService<rmcp::RoleClient, ()>,
    node: ServerSpec,
) {
    const CALLS: usize = 2000;
    // Node path: registry, connection manager, policy, router.
    let registry = registry(vec![node]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry);
    let (task, session) = policies(&["everything".to_string()]);
    let set = router.tool_set(&task, &session).await;
    let echo = set
        .tools
        .iter()
        .find(|t| t.tool == "echo")
        .map(|t| t.name.clone())
        .unwrap_or_else(|| panic!("the node offers no echo over {transport}"));

    let args = serde_json::json!({"message": "benchmark"});
    let mut direct_samples = Vec::with_capacity(CALLS);
    let mut node_samples = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 200 {
        let started = Instant::now();
        let mut params = CallToolRequestParams::new("echo");
        params.arguments = args.as_object().cloned();
        let result = direct.peer().call_tool(params).await;
        let d = started.elapsed();
        assert!(result.is_ok());
        let started = Instant::now();
        let outcome = router
            .execute(&task, &session, &set, &echo, r#"{"message": "benchmark"}"#)
            .await;
        let n = started.elapsed();
        assert!(!outcome.is_error, "{}", outcome.text);
        if i >= 200 {
            direct_samples.push(d);
            node_samples.push(n);
        }
    }
    let (d50, d99) = (
        percentile(&mut direct_samples, 0.5),
        percentile(&mut direct_samples, 0.99),
    );
    let (n50, n99) = (
        percentile(&mut node_samples, 0.5),
        percentile(&mut node_samples, 0.99),
    );
    println!("\n## tool-call overhead, server-everything echo over {transport}, {CALLS} calls each, interleaved");
    println!(
        "direct rmcp (baseline): p50 {:.1} us, p99 {:.1} us",
        us(d50),
        us(d99)
    );
    println!(
        "node path:              p50 {:.1} us, p99 {:.1} us",
        us(n50),
        us(n99)
    );
    println!(
        "added at p50: {:.1} us; ratio p50 {:.3}",
        us(n50) - us(d50),
        n50.as_secs_f64() / d50.as_secs_f64()
    );
    let _ = direct.cancel().await;
    connections.shutdown().await;
}

async fn throughput() {
    const CONCURRENCY: usize = 8;
    const SECONDS: u64 = 5;
    let mut s = spec("everything", &everything(), &["stdio"]);
    s.limits = Some(spear_proto::v1::Limits {
        max_concurrency: 8,
        max_output_bytes: 0,
        max_tools: 0,
    });
    let registry = registry(vec![s]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry);
    let (task, session) = policies(&["everything".to_string()]);
    let set = Arc::new(router.tool_set(&task, &session).await);
    let echo = set
        .tools
        .iter()
        .find(|t| t.tool == "echo")
        .map(|t| t.name.clone())
        .unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(SECONDS);
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (router, task, session, set, echo) = (
            router.clone(),
            task.clone(),
            session.clone(),
            Arc::clone(&set),
            echo.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let outcome = router
                    .execute(&task, &session, &set, &echo, r#"{"message": "x"}"#)
                    .await;
                assert!(!outcome.is_error);
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap_or(0);
    }
    println!(
        "\n## throughput to one stdio server (server-everything echo), concurrency {CONCURRENCY}"
    );
    println!(
        "{total} calls in {SECONDS} s: {:.0} calls/s",
        total as f64 / SECONDS as f64
    );
    connections.shutdown().await;
}

async fn toolset_and_memory() {
    const SERVERS: usize = 50;
    const TOOLS: usize = 20;
    let ids: Vec<String> = (0..SERVERS).map(|i| format!("s{i:02}")).collect();
    let specs = ids
        .iter()
        .map(|id| {
            let mut s = spec(id, "python3", &[&misbehaving()]);
            // 8 usable tools of its own (a ninth is quarantined) plus 12 plain ones.
            s.env.insert("EXTRA_TOOLS".into(), (TOOLS - 8).to_string());
            s
        })
        .collect();
    let registry = registry(specs);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry);
    let (task, session) = policies(&ids);
    let before = rss_kib();
    let set = router.tool_set(&task, &session).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib();
    assert_eq!(
        set.tools.len(),
        SERVERS * TOOLS,
        "every server must be connected"
    );
    let mut samples = Vec::new();
    for _ in 0..500 {
        let started = Instant::now();
        let set = router.tool_set(&task, &session).await;
        samples.push(started.elapsed());
        assert_eq!(set.tools.len(), SERVERS * TOOLS);
    }
    let (p50, p99) = (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    );
    println!("\n## building the tool list of a request: {SERVERS} servers x {TOOLS} tools (catalogs cached)");
    println!("p50 {:.1} us, p99 {:.1} us", us(p50), us(p99));
    println!(
        "\n## node memory per idle connection ({SERVERS} stdio connections with their catalogs)"
    );
    println!(
        "node RSS {before} KiB -> {after} KiB: {:.1} KiB per connection (the server processes themselves are separate)",
        (after.saturating_sub(before)) as f64 / SERVERS as f64
    );
    connections.shutdown().await;
}

fn main() {
    // What every suite here needs, said in one line when it is missing.
    everything();
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |name: &str| args.is_empty() || args.iter().any(|a| a == name);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    if want("overhead") {
        runtime.block_on(overhead());
    }
    if want("overhead-http") {
        runtime.block_on(overhead_http());
    }
    if want("throughput") {
        runtime.block_on(throughput());
    }
    if want("pins") {
        runtime.block_on(pin_cost::run());
    }
    if want("audit") {
        runtime.block_on(audit_cost::run());
    }
    if want("quotas") {
        runtime.block_on(quota_cost::run());
    }
    if want("sandbox") {
        runtime.block_on(sandbox_cost::run());
    }
    if want("toolset") || want("memory") {
        runtime.block_on(toolset_and_memory());
    }
}
