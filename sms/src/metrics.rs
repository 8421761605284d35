//! Prometheus metrics over HTTP (`GET /metrics`), in the text format.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tracing::warn;

use crate::files::FileProblems;
use crate::nodes::NodeTable;
use crate::watch::Hub;

/// What the metrics endpoint reads from.
#[derive(Clone)]
pub struct Metrics {
    hub: Arc<Hub>,
    nodes: Arc<NodeTable>,
    problems: Arc<FileProblems>,
}

impl Metrics {
    pub fn new(hub: Arc<Hub>, nodes: Arc<NodeTable>, problems: Arc<FileProblems>) -> Self {
        Self {
            hub,
            nodes,
            problems,
        }
    }

    /// Binds `addr` and serves `/metrics` in the background; returns the
    /// bound address.
    pub async fn serve(self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let app = Router::new()
            .route("/metrics", get(move || std::future::ready(self.render())))
            .route("/healthz", get(|| std::future::ready("ok\n")));
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                warn!(%error, "metrics endpoint stopped");
            }
        });
        Ok(bound)
    }

    /// The current metrics in Prometheus text format.
    pub fn render(&self) -> String {
        let (epoch, revision) = self.hub.position();
        let stats = &self.hub.stats;
        let mut out = String::new();
        gauge(
            &mut out,
            "sms_registry_revision",
            "Current registry revision.",
            revision,
        );
        gauge(
            &mut out,
            "sms_registry_epoch",
            "Current registry epoch.",
            epoch,
        );
        gauge(
            &mut out,
            "sms_registry_servers",
            "Registered MCP servers.",
            self.hub.server_count() as u64,
        );
        gauge(
            &mut out,
            "sms_watch_streams",
            "Open watch streams.",
            stats.streams.load(Ordering::Relaxed) as u64,
        );
        counter(
            &mut out,
            "sms_snapshot_encodes_total",
            "Snapshots encoded (once per revision asked for).",
            stats.snapshot_encodes.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sms_snapshots_sent_total",
            "Snapshots sent to nodes.",
            stats.snapshots_sent.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sms_deltas_sent_total",
            "Deltas sent to nodes.",
            stats.deltas_sent.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "sms_registry_reloads_total",
            "Full reloads of the registry from the store.",
            stats.reloads.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "sms_file_errors",
            "Files in the MCP directory currently rejected.",
            self.problems.rejected_files() as u64,
        );
        let nodes = self.nodes.status(epoch, revision);
        let _ = writeln!(out, "# HELP sms_node_lag Registry revisions each node is behind.\n# TYPE sms_node_lag gauge");
        for node in &nodes {
            let _ = writeln!(
                out,
                "sms_node_lag{{node=\"{}\"}} {}",
                escape(&node.node_id),
                node.lag
            );
        }
        gauge(
            &mut out,
            "sms_nodes_alive",
            "Nodes that sent a heartbeat recently.",
            nodes.iter().filter(|n| n.alive).count() as u64,
        );
        out
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
    );
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
