//! What the northbound endpoint adds to a call: the same `tools/call` of
//! an MCP server's echo tool, made directly (an rmcp client to the server)
//! and through a virtual server (an rmcp client to `spearlet`'s endpoint,
//! which resolves the name, checks the policy and calls the server over
//! the node's session), by 1, 8 and 64 clients at once, each with a
//! session of its own, calls back to back. The server is rmcp's own, on
//! loopback, in this process, so what differs is the endpoint's path.
//!
//! `cargo bench -p spear-tests --bench northbound` (release build).

#[path = "bench_support/stats.rs"]
#[allow(unused_imports)] // its `rss_kib` is for the other benches
mod stats;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use spear_proto::v1::{ServerSpec, Transport, VirtualOffer, VirtualServerSpec};
use spearlet::connections::Connections;
use spearlet::northbound::{serve, VirtualServer, VirtualTools};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tools::Router;
use stats::{machine, ms, Summary};

/// Calls each client makes, after its first.
const CALLS: usize = 200;

/// The upstream: one tool that echoes its `text`.
#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema =
            serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
        let tool = Tool::new("echo", "Echoes its text", schema);
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .and_then(|a| a.get("text").and_then(|t| t.as_str().map(str::to_string)))
            .unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The upstream on a loopback port; its URL.
async fn upstream() -> String {
    let service = StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

/// `clients` sessions calling `tool` at `url` back to back; every call's time.
async fn calls(url: &str, tool: &'static str, clients: usize) -> Vec<Duration> {
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        let client = ()
            .serve(StreamableHttpClientTransport::from_uri(url.to_string()))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
        sessions.push(client);
    }
    let runs = sessions.into_iter().map(|client| {
        tokio::spawn(async move {
            let mut times = Vec::with_capacity(CALLS);
            for i in 0..=CALLS {
                let args = serde_json::json!({"text": "ping"}).as_object().cloned();
                let started = Instant::now();
                let mut params = CallToolRequestParams::new(tool);
                params.arguments = args;
                let result = client
                    .call_tool(params)
                    .await
                    .unwrap_or_else(|e| panic!("{tool}: {e}"));
                assert_eq!(result.is_error, Some(false), "{result:?}");
                if i > 0 {
                    times.push(started.elapsed());
                }
            }
            let _ = client.cancel().await;
            times
        })
    });
    let mut all = Vec::new();
    for run in futures::future::join_all(runs).await {
        all.extend(run.unwrap_or_else(|e| panic!("{e}")));
    }
    all
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(async {
        let url = upstream().await;
        let spec = ServerSpec {
            id: "echo".into(),
            transport: Transport::StreamableHttp as i32,
            url: url.clone(),
            enabled: true,
            ..Default::default()
        };
        let registry = RegistryHandle::new(RegistryView::from_specs([spec]));
        let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
        let router = Router::new(connections.clone(), registry);
        let offer = VirtualOffer {
            server_id: "echo".into(),
            ..Default::default()
        };
        let virtual_server = VirtualServerSpec {
            name: "bench".into(),
            offers: vec![offer],
            ..Default::default()
        };
        let endpoint = VirtualServer::new(VirtualTools::new(virtual_server), router);
        let listening = serve("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")), vec![endpoint])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let through = listening.url("bench");

        println!("\n## a call through the northbound endpoint against the same call made directly (release build)");
        println!("{}", machine());
        println!("| clients | direct p50 | direct p99 | through p50 | through p99 | added p50 | added p99 |");
        println!("|---|---|---|---|---|---|---|");
        for clients in [1, 8, 64] {
            // Warm both paths (sessions, the node's catalog) before measuring.
            calls(&url, "echo", clients.min(8)).await;
            calls(&through, "echo__echo", clients.min(8)).await;
            let direct = Summary::of(calls(&url, "echo", clients).await);
            let via = Summary::of(calls(&through, "echo__echo", clients).await);
            println!(
                "| {clients} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {:+.3} ms | {:+.3} ms |",
                ms(direct.p50),
                ms(direct.p99),
                ms(via.p50),
                ms(via.p99),
                ms(via.p50) - ms(direct.p50),
                ms(via.p99) - ms(direct.p99)
            );
        }
        listening.shutdown().await;
        connections.shutdown().await;
    });
}
