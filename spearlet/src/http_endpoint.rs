//! The node's HTTP endpoint: `/registry`, `/status`, `/metrics`, `/healthz`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use spear_proto::v1::SyncState;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::connections::{Connections, ServerState};
use crate::registry::{redacted_json, RegistryHandle};
use crate::sync::{state_name, SyncStatusCell};

/// What the endpoint reads from.
#[derive(Clone)]
pub struct NodeView {
    pub node_id: String,
    pub registry: RegistryHandle,
    pub status: Arc<SyncStatusCell>,
    pub connections: Connections,
    pub advert: crate::heartbeat::Advert,
}

impl NodeView {
    pub fn status_json(&self) -> Value {
        let view = self.registry.current();
        let status = self.status.status.lock().clone();
        json!({
            "node_id": self.node_id,
            "sync_state": state_name(status.state),
            "epoch": view.epoch,
            "revision": view.revision,
            "servers": view.servers.len(),
            "sms": status.sms,
            "sms_revision": status.sms_revision,
            "last_error": status.last_error,
            "invoke_addr": self.advert.invoke_addr,
            "guest_runs": {
                "in_progress": self.advert.runs.running.load(Ordering::Relaxed),
                "ok": self.advert.runs.ok.load(Ordering::Relaxed),
                "failed": self.advert.runs.failed.load(Ordering::Relaxed),
                "stopped": self.advert.runs.stopped.load(Ordering::Relaxed),
            },
            "mcp_servers": self.connections.status().into_iter().map(|(id, s)| (id, json!({
                "state": s.state.name(),
                "last_error": s.last_error,
                "restarts": s.restarts,
                "tools": s.tools,
                "quarantined": s.quarantined.iter().map(|q| json!({"tool": q.tool, "why": q.why})).collect::<Vec<_>>(),
            }))).collect::<serde_json::Map<String, Value>>(),
        })
    }

    pub fn metrics(&self) -> String {
        let view = self.registry.current();
        let state = self.status.status.lock().state;
        let c = &self.status.counters;
        let runs = &self.advert.runs;
        let servers = self.connections.status();
        let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed).to_string();
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, String)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in rows {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let one = |value: String| vec![(String::new(), value)];
        let per_server = |value: &dyn Fn(&crate::connections::ServerStatus) -> String| {
            servers
                .iter()
                .map(|(id, s)| (format!("{{server=\"{id}\"}}"), value(s)))
                .collect::<Vec<_>>()
        };

        family(
            "spearlet_registry_revision",
            "gauge",
            "Applied registry revision.",
            one(view.revision.to_string()),
        );
        family(
            "spearlet_registry_epoch",
            "gauge",
            "Applied registry epoch.",
            one(view.epoch.to_string()),
        );
        family(
            "spearlet_registry_servers",
            "gauge",
            "Servers in the applied registry.",
            one(view.servers.len().to_string()),
        );
        family(
            "spearlet_sync_reconnects_total",
            "counter",
            "Watch reconnections.",
            one(load(&c.reconnects)),
        );
        family(
            "spearlet_snapshots_applied_total",
            "counter",
            "Snapshots applied.",
            one(load(&c.snapshots)),
        );
        family(
            "spearlet_deltas_applied_total",
            "counter",
            "Deltas applied.",
            one(load(&c.deltas)),
        );
        family(
            "spearlet_sync_gaps_total",
            "counter",
            "Resynchronisations after a gap or a bad snapshot.",
            one(load(&c.gaps)),
        );
        family(
            "spearlet_sync_state",
            "gauge",
            "1 for the current sync state.",
            [SyncState::Connecting, SyncState::Synced, SyncState::Stale]
                .into_iter()
                .map(|s| {
                    (
                        format!("{{state=\"{}\"}}", state_name(s)),
                        u8::from(s == state).to_string(),
                    )
                })
                .collect(),
        );
        family(
            "spearlet_guest_runs_in_progress",
            "gauge",
            "Guest runs in progress.",
            one(runs.running.load(Ordering::Relaxed).to_string()),
        );
        family(
            "spearlet_guest_runs_total",
            "counter",
            "Guest runs by how they ended (stopped: a trap or a limit).",
            [
                ("ok", &runs.ok),
                ("failed", &runs.failed),
                ("stopped", &runs.stopped),
            ]
            .into_iter()
            .map(|(outcome, n)| (format!("{{outcome=\"{outcome}\"}}"), load(n)))
            .collect(),
        );
        family(
            "spearlet_loop_iterations_total",
            "counter",
            "Auto tool-call loop iterations (model requests) of guest runs.",
            one(load(&runs.loop_iterations)),
        );
        family(
            "spearlet_mcp_server_up",
            "gauge",
            "1 when the server's connection is ready or degraded.",
            servers
                .iter()
                .map(|(id, s)| {
                    let up = matches!(s.state, ServerState::Ready | ServerState::Degraded);
                    (
                        format!("{{server=\"{id}\",state=\"{}\"}}", s.state.name()),
                        u8::from(up).to_string(),
                    )
                })
                .collect(),
        );
        family(
            "spearlet_mcp_calls_total",
            "counter",
            "Tool calls per server.",
            per_server(&|s| s.calls.to_string()),
        );
        family(
            "spearlet_mcp_call_errors_total",
            "counter",
            "Tool calls that failed or returned isError.",
            per_server(&|s| s.call_errors.to_string()),
        );
        family(
            "spearlet_mcp_call_seconds_sum",
            "counter",
            "Total time in tool calls.",
            per_server(&|s| format!("{:.6}", s.call_seconds)),
        );
        out
    }

    /// Binds `addr` and serves in the background; returns the bound address.
    /// Binds `addr` and serves until `shutdown`; returns the bound address
    /// and the serving task.
    pub async fn serve(
        self,
        addr: SocketAddr,
        mut shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let (a, b, c) = (self.clone(), self.clone(), self);
        let app = Router::new()
            .route(
                "/registry",
                get(move || std::future::ready(Json(redacted_json(&a.registry.current())))),
            )
            .route(
                "/status",
                get(move || std::future::ready(Json(b.status_json()))),
            )
            .route("/metrics", get(move || std::future::ready(c.metrics())))
            .route("/healthz", get(|| std::future::ready("ok\n")));
        let stopped = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                warn!(%error, "HTTP endpoint stopped");
            }
        });
        Ok((bound, task))
    }
}
