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
use tracing::warn;

use crate::connections::Connections;
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
                "quarantined": s.quarantined.iter().map(|(t, why)| json!({"tool": t, "why": why})).collect::<Vec<_>>(),
            }))).collect::<serde_json::Map<String, Value>>(),
        })
    }

    pub fn metrics(&self) -> String {
        let view = self.registry.current();
        let state = self.status.status.lock().state;
        let c = &self.status.counters;
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "spearlet_registry_revision",
            "gauge",
            "Applied registry revision.",
            view.revision,
        );
        metric(
            "spearlet_guest_runs_in_progress",
            "gauge",
            "Guest runs in progress.",
            u64::from(self.advert.runs.running.load(Ordering::Relaxed)),
        );
        metric(
            "spearlet_loop_iterations_total",
            "counter",
            "Auto tool-call loop iterations (model requests) of guest runs.",
            self.advert.runs.loop_iterations.load(Ordering::Relaxed),
        );
        metric(
            "spearlet_registry_epoch",
            "gauge",
            "Applied registry epoch.",
            view.epoch,
        );
        metric(
            "spearlet_registry_servers",
            "gauge",
            "Servers in the applied registry.",
            view.servers.len() as u64,
        );
        metric(
            "spearlet_sync_reconnects_total",
            "counter",
            "Watch reconnections.",
            c.reconnects.load(Ordering::Relaxed),
        );
        metric(
            "spearlet_snapshots_applied_total",
            "counter",
            "Snapshots applied.",
            c.snapshots.load(Ordering::Relaxed),
        );
        metric(
            "spearlet_deltas_applied_total",
            "counter",
            "Deltas applied.",
            c.deltas.load(Ordering::Relaxed),
        );
        metric(
            "spearlet_sync_gaps_total",
            "counter",
            "Resynchronisations after a gap or a bad snapshot.",
            c.gaps.load(Ordering::Relaxed),
        );
        let runs = &self.advert.runs;
        let _ = writeln!(out, "# HELP spearlet_guest_runs_total Guest runs by how they ended (stopped: a trap or a limit).\n# TYPE spearlet_guest_runs_total counter");
        for (outcome, counter) in [
            ("ok", &runs.ok),
            ("failed", &runs.failed),
            ("stopped", &runs.stopped),
        ] {
            let _ = writeln!(
                out,
                "spearlet_guest_runs_total{{outcome=\"{outcome}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP spearlet_sync_state 1 for the current sync state.\n# TYPE spearlet_sync_state gauge");
        for s in [SyncState::Connecting, SyncState::Synced, SyncState::Stale] {
            let _ = writeln!(
                out,
                "spearlet_sync_state{{state=\"{}\"}} {}",
                state_name(s),
                u8::from(s == state)
            );
        }
        let servers = self.connections.status();
        let _ = writeln!(out, "# HELP spearlet_mcp_server_up 1 when the server's connection is ready or degraded.\n# TYPE spearlet_mcp_server_up gauge");
        for (id, s) in &servers {
            let up = matches!(
                s.state,
                crate::connections::ServerState::Ready | crate::connections::ServerState::Degraded
            );
            let _ = writeln!(
                out,
                "spearlet_mcp_server_up{{server=\"{id}\",state=\"{}\"}} {}",
                s.state.name(),
                u8::from(up)
            );
        }
        let _ = writeln!(out, "# HELP spearlet_mcp_calls_total Tool calls per server.\n# TYPE spearlet_mcp_calls_total counter");
        for (id, s) in &servers {
            let _ = writeln!(
                out,
                "spearlet_mcp_calls_total{{server=\"{id}\"}} {}",
                s.calls
            );
        }
        let _ = writeln!(out, "# HELP spearlet_mcp_call_errors_total Tool calls that failed or returned isError.\n# TYPE spearlet_mcp_call_errors_total counter");
        for (id, s) in &servers {
            let _ = writeln!(
                out,
                "spearlet_mcp_call_errors_total{{server=\"{id}\"}} {}",
                s.call_errors
            );
        }
        let _ = writeln!(out, "# HELP spearlet_mcp_call_seconds_sum Total time in tool calls.\n# TYPE spearlet_mcp_call_seconds_sum counter");
        for (id, s) in &servers {
            let _ = writeln!(
                out,
                "spearlet_mcp_call_seconds_sum{{server=\"{id}\"}} {:.6}",
                s.call_seconds
            );
        }
        out
    }

    /// Binds `addr` and serves in the background; returns the bound address.
    pub async fn serve(self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
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
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                warn!(%error, "HTTP endpoint stopped");
            }
        });
        Ok(bound)
    }
}
