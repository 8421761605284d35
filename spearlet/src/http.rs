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

use crate::registry::{redacted_json, RegistryHandle};
use crate::sync::{state_name, SyncStatusCell};

/// What the endpoint reads from.
#[derive(Clone)]
pub struct NodeView {
    pub node_id: String,
    pub registry: RegistryHandle,
    pub status: Arc<SyncStatusCell>,
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
        })
    }

    pub fn metrics(&self) -> String {
        let view = self.registry.current();
        let state = self.status.status.lock().state;
        let c = &self.status.counters;
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        metric("spearlet_registry_revision", "gauge", "Applied registry revision.", view.revision);
        metric("spearlet_registry_epoch", "gauge", "Applied registry epoch.", view.epoch);
        metric("spearlet_registry_servers", "gauge", "Servers in the applied registry.", view.servers.len() as u64);
        metric("spearlet_sync_reconnects_total", "counter", "Watch reconnections.", c.reconnects.load(Ordering::Relaxed));
        metric("spearlet_snapshots_applied_total", "counter", "Snapshots applied.", c.snapshots.load(Ordering::Relaxed));
        metric("spearlet_deltas_applied_total", "counter", "Deltas applied.", c.deltas.load(Ordering::Relaxed));
        metric("spearlet_sync_gaps_total", "counter", "Resynchronisations after a gap or a bad snapshot.", c.gaps.load(Ordering::Relaxed));
        let _ = writeln!(out, "# HELP spearlet_sync_state 1 for the current sync state.\n# TYPE spearlet_sync_state gauge");
        for s in [SyncState::Connecting, SyncState::Synced, SyncState::Stale] {
            let _ = writeln!(out, "spearlet_sync_state{{state=\"{}\"}} {}", state_name(s), u8::from(s == state));
        }
        out
    }

    /// Binds `addr` and serves in the background; returns the bound address.
    pub async fn serve(self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let (a, b, c) = (self.clone(), self.clone(), self);
        let app = Router::new()
            .route("/registry", get(move || std::future::ready(Json(redacted_json(&a.registry.current())))))
            .route("/status", get(move || std::future::ready(Json(b.status_json()))))
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
