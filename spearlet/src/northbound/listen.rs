//! [`serve`]: the HTTP listener of the northbound endpoint, one path per
//! virtual server (`/v/<name>/mcp`), rmcp's Streamable HTTP server behind
//! each: 2025-11-25 clients get sessions (`Mcp-Session-Id`), 2026-07-28
//! clients are served statelessly.
//!
//! Loopback only for now: the endpoint has no TLS and no sign-in of its
//! own yet, so anything that can reach it could call every tool. rmcp also
//! checks each request's `Host` against loopback names, so a web page
//! cannot reach it through DNS rebinding.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::handler::VirtualServer;

/// Why the endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0} is not a loopback address: the northbound endpoint has no TLS or sign-in yet, so it listens on loopback only (127.0.0.1 or [::1])")]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The running endpoint; [`Listening::shutdown`] ends it.
pub struct Listening {
    /// Where it listens (the port the system chose, for port 0).
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Listening {
    /// The URL of virtual server `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/v/{name}/mcp", self.addr)
    }

    /// Ends every session and stops listening.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Serves `servers` on `addr`.
pub async fn serve(addr: SocketAddr, servers: Vec<VirtualServer>) -> Result<Listening, ServeError> {
    if !addr.ip().is_loopback() {
        return Err(ServeError::NotLoopback(addr));
    }
    let stop = CancellationToken::new();
    let mut app = axum::Router::new();
    for server in servers {
        tokio::spawn(super::watcher::watch(server.clone(), stop.child_token()));
        let path = format!("/v/{}/mcp", server.name());
        let config =
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        app = app.nest_service(&path, service);
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    info!(%addr, "northbound MCP endpoint listening");
    let stopping = stop.clone();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stopping.cancelled_owned())
            .await;
        if let Err(error) = served {
            warn!(%error, "the northbound endpoint stopped");
        }
    });
    Ok(Listening { addr, stop, task })
}
