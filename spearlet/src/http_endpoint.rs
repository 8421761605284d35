//! The node's HTTP endpoint: `/registry`, `/status`, `/metrics`, and the
//! probes `/livez` (the process answers; `/healthz` is the same) and
//! `/readyz` (503 with the reason while [`crate::sync::Readiness`] is not
//! ready: no registry yet, or away from SMS past the stale bound).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use spear_common::metrics::Scrape;
use spear_proto::v1::SyncState;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::connections::{Connections, ServerState, ServerStatus};
use crate::registry::{redacted_json, RegistryHandle};
use crate::sync::{Readiness, SyncStatusCell};

/// What the endpoint reads from.
#[derive(Clone)]
pub struct NodeView {
    pub node_id: String,
    pub registry: RegistryHandle,
    pub status: Arc<SyncStatusCell>,
    pub connections: Connections,
    pub advert: crate::heartbeat::Advert,
    /// How long the node may serve a registry without SMS and stay ready.
    pub stale_after: std::time::Duration,
    /// Plaintext beyond loopback (`--insecure`), shown in `/status` and
    /// `/metrics`.
    pub insecure: bool,
    /// Certificates SMS revoked: refused here too.
    pub revoked: spear_identity::DenyList,
    /// The SMS the node follows, shown in `/status`.
    pub sms: crate::sms_link::SmsLink,
    /// The node's fleet quotas (when it runs guests).
    pub quotas: Option<Arc<crate::quota::QuotaStats>>,
    /// Model usage by task, principal and model (when it runs guests).
    pub meters: Option<Arc<crate::trust::meters::UsageMeters>>,
}

impl NodeView {
    /// Whether the node should be given work now.
    pub fn readiness(&self) -> Readiness {
        if self.advert.runs.is_draining() {
            return Readiness::Draining;
        }
        let epoch = self.registry.current().epoch;
        let status = self.status.status.lock();
        status.readiness(epoch, self.stale_after, std::time::Instant::now())
    }

    pub fn status_json(&self) -> Value {
        let view = self.registry.current();
        let status = self.status.status.lock().clone();
        json!({
            "node_id": self.node_id,
            "insecure": self.insecure,
            "sync_state": status.state.label(),
            "epoch": view.epoch,
            "revision": view.revision,
            "servers": view.servers.len(),
            "sms": self.sms.current(),
            "sms_revision": status.sms_revision,
            "last_error": status.last_error,
            "invoke_addr": self.advert.invoke_addr,
            "draining": self.advert.runs.is_draining(),
            "guest_runs": {
                "in_progress": self.advert.runs.running.load(Ordering::Relaxed),
                "ok": self.advert.runs.ok.load(Ordering::Relaxed),
                "failed": self.advert.runs.failed.load(Ordering::Relaxed),
                "stopped": self.advert.runs.stopped.load(Ordering::Relaxed),
            },
            "mcp_servers": self.connections.status().into_iter().map(|(id, s)| (id, json!({
                "state": s.state.name(),
                "protocol_version": s.protocol_version,
                "sandbox": s.sandbox.as_ref().map(|b| json!({"state": b.label, "detail": b.detail})),
                "last_error": s.last_error,
                "restarts": s.restarts,
                "tools": s.tools,
                "quarantined": s.quarantined.iter().map(|q| json!({"tool": q.tool, "why": q.why})).collect::<Vec<_>>(),
                "held": s.held.iter().map(|(tool, why)| json!({"tool": tool, "why": why})).collect::<Vec<_>>(),
            }))).collect::<serde_json::Map<String, Value>>(),
        })
    }

    /// The node's metrics in the OpenMetrics text format.
    pub fn metrics(&self) -> String {
        let this = self.clone();
        spear_common::metrics::render(move |m| this.scrape(m))
    }

    fn scrape(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        self.scrape_sync(m)?;
        self.scrape_guests(m)?;
        self.scrape_quotas(m)?;
        self.scrape_usage(m)?;
        self.scrape_mcp(m)
    }

    /// Model requests, tokens and cost by task, principal and model.
    fn scrape_usage(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        let Some(meters) = &self.meters else {
            return Ok(());
        };
        let all = meters.snapshot();
        fn labels(l: &(String, String, String)) -> Vec<(&'static str, &str)> {
            vec![("task", &l.0), ("principal", &l.1), ("model", &l.2)]
        }
        m.counters(
            "spearlet_model_requests",
            "Model requests of guest runs, by task, principal and model.",
            all.iter().map(|(l, t)| (labels(l), t.requests)),
        )?;
        m.counters(
            "spearlet_model_tokens",
            "Model tokens as providers report them, by task, principal, model and direction.",
            all.iter().flat_map(|(l, t)| {
                let with = |direction| {
                    let mut row = labels(l);
                    row.push(("direction", direction));
                    row
                };
                [
                    (with("input"), t.input_tokens),
                    (with("output"), t.output_tokens),
                ]
            }),
        )?;
        m.counters(
            "spearlet_model_cost_nano_usd",
            "Model cost at the node's [llm.prices], in nano-dollars, by task, principal and model.",
            all.iter().map(|(l, t)| (labels(l), t.cost_nano_usd)),
        )
    }

    /// Fleet quotas: round trips to SMS, refusals, calls let through.
    fn scrape_quotas(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        let Some(quotas) = &self.quotas else {
            return Ok(());
        };
        m.counter(
            "spearlet_quota_takes",
            "Slices of fleet quotas asked of SMS (each a round trip; calls within a slice make none).",
            load(&quotas.takes),
        )?;
        m.counters(
            "spearlet_quota_refusals",
            "Calls and model requests a fleet quota refused: spent until it refills, not countable while SMS is unreachable, or refused by SMS (this node's take was out of bounds: SMS's sms_quota_refusals_total says why).",
            [
                ("spent", &quotas.refused_spent),
                ("unreachable", &quotas.refused_unreachable),
                ("refused_by_sms", &quotas.refused_by_sms),
            ]
            .into_iter()
            .map(|(reason, n)| (vec![("reason", reason)], load(n))),
        )?;
        m.counter(
            "spearlet_quota_uncounted",
            "Calls let through uncounted while SMS was unreachable (on_unreachable: allow).",
            load(&quotas.allowed_uncounted),
        )
    }

    /// The applied registry and how sync follows SMS.
    fn scrape_sync(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        let view = self.registry.current();
        let state = self.status.status.lock().state;
        let c = &self.status.counters;
        m.gauge(
            "spearlet_insecure",
            "1 when the node follows SMS or serves invocations in plaintext beyond loopback (--insecure).",
            i64::from(self.insecure),
        )?;
        m.gauge(
            "spearlet_registry_revision",
            "Applied registry revision.",
            view.revision as i64,
        )?;
        m.gauge(
            "spearlet_registry_epoch",
            "Applied registry epoch.",
            view.epoch as i64,
        )?;
        m.gauge(
            "spearlet_registry_servers",
            "Servers in the applied registry.",
            view.servers.len() as i64,
        )?;
        m.counter(
            "spearlet_sync_reconnects",
            "Watch reconnections.",
            load(&c.reconnects),
        )?;
        m.counter(
            "spearlet_snapshots_applied",
            "Snapshots applied.",
            load(&c.snapshots),
        )?;
        m.counter(
            "spearlet_deltas_applied",
            "Deltas applied.",
            load(&c.deltas),
        )?;
        m.counter(
            "spearlet_sync_gaps",
            "Resynchronisations after a gap or a bad snapshot.",
            load(&c.gaps),
        )?;
        m.gauges(
            "spearlet_sync_state",
            "1 for the current sync state.",
            [SyncState::Connecting, SyncState::Synced, SyncState::Stale]
                .into_iter()
                .map(|s| (vec![("state", s.label())], i64::from(s == state))),
        )
    }

    /// Guest runs, their loops and their own tools.
    fn scrape_guests(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        let runs = &self.advert.runs;
        m.gauge(
            "spearlet_guest_runs_in_progress",
            "Guest runs in progress.",
            runs.running.load(Ordering::Relaxed) as i64,
        )?;
        m.counters(
            "spearlet_guest_runs",
            "Guest runs by how they ended (stopped: a trap or a limit).",
            [
                ("ok", &runs.ok),
                ("failed", &runs.failed),
                ("stopped", &runs.stopped),
            ]
            .into_iter()
            .map(|(outcome, n)| (vec![("outcome", outcome)], load(n))),
        )?;
        m.counter(
            "spearlet_loop_iterations",
            "Auto tool-call loop iterations (model requests) of guest runs.",
            load(&runs.loop_iterations),
        )?;
        m.counters(
            "spearlet_guest_tool_calls",
            "Calls of guests' own tools (cchat_write_fn), by outcome.",
            [
                ("ok", &runs.guest_tool_ok),
                ("error", &runs.guest_tool_errors),
            ]
            .into_iter()
            .map(|(outcome, n)| (vec![("outcome", outcome)], load(n))),
        )?;
        m.histogram(
            "spearlet_guest_run_duration_seconds",
            "How long guest runs took, whatever their outcome.",
            &runs.run_seconds,
        )?;
        m.histogram(
            "spearlet_llm_request_duration_seconds",
            "How long model requests of guest runs took.",
            &runs.model_seconds,
        )
    }

    /// Each MCP server's connection and calls.
    fn scrape_mcp(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        let servers = self.connections.status();
        let per_server = |value: &dyn Fn(&ServerStatus) -> u64| {
            servers
                .iter()
                .map(|(id, s)| (vec![("server", id.as_str())], value(s)))
                .collect::<Vec<_>>()
        };
        m.gauges(
            "spearlet_mcp_server_up",
            "1 when the server's connection is ready or degraded.",
            servers.iter().map(|(id, s)| {
                let up = matches!(s.state, ServerState::Ready | ServerState::Degraded);
                (
                    vec![("server", id.as_str()), ("state", s.state.name())],
                    i64::from(up),
                )
            }),
        )?;
        m.counters(
            "spearlet_mcp_calls",
            "Tool calls per server.",
            per_server(&|s| s.calls),
        )?;
        m.counters(
            "spearlet_mcp_call_errors",
            "Tool calls that failed or returned isError.",
            per_server(&|s| s.call_errors),
        )?;
        m.counters(
            "spearlet_mcp_call_seconds",
            "Total time in tool calls, per server.",
            servers
                .iter()
                .map(|(id, s)| (vec![("server", id.as_str())], s.call_seconds)),
        )?;
        m.counters(
            "spearlet_mcp_server_requests_refused",
            "Requests from the server past the node's bound per server, answered with an error.",
            per_server(&|s| s.requests_refused),
        )?;
        m.histograms(
            "spearlet_mcp_call_duration_seconds",
            "Tool call latency, per server.",
            servers
                .iter()
                .map(|(id, s)| (vec![("server", id.as_str())], &s.call_latency)),
        )
    }

    /// Binds `addr` and serves until `shutdown`; returns the bound address
    /// and the serving task. `/status` and `/registry` answer only this
    /// machine and callers with an admin's or SMS's certificate.
    pub async fn serve(
        self,
        addr: SocketAddr,
        tls: Option<spear_identity::TlsIdentity>,
        mut shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let listener = spear_identity::HttpListener::new(listener, tls)?;
        let (a, b, c, d) = (self.clone(), self.clone(), self.clone(), self);
        // What the node reports about itself is for this machine and for
        // admins; metrics and probes are for anyone who reaches the port.
        let reports = Router::new()
            .route(
                "/registry",
                get(move || std::future::ready(Json(redacted_json(&a.registry.current())))),
            )
            .route(
                "/status",
                get(move || std::future::ready(Json(b.status_json()))),
            )
            .layer(axum::middleware::from_fn_with_state(
                d.revoked.clone(),
                operators_only,
            ));
        let app = Router::new()
            .merge(reports)
            .route(
                "/metrics",
                get(move || {
                    std::future::ready((
                        [("content-type", spear_common::metrics::CONTENT_TYPE)],
                        c.metrics(),
                    ))
                }),
            )
            .route("/healthz", get(|| std::future::ready("ok\n")))
            .route("/livez", get(|| std::future::ready("ok\n")))
            .route(
                "/readyz",
                get(move || {
                    let readiness = d.readiness();
                    let code = match readiness {
                        Readiness::Ready => StatusCode::OK,
                        _ => StatusCode::SERVICE_UNAVAILABLE,
                    };
                    std::future::ready((code, format!("{readiness}\n")))
                }),
            );
        let stopped = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        let task = tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<spear_identity::Peer>();
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

/// Lets a report through to this machine and to admins (see
/// [`spear_identity::reads_reports`]); anyone else gets 403 and what to do.
async fn operators_only(
    axum::extract::State(revoked): axum::extract::State<spear_identity::DenyList>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<spear_identity::Peer>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if spear_identity::reads_reports(&peer, &revoked) {
        return next.run(request).await;
    }
    (
        StatusCode::FORBIDDEN,
        "this report is for the node's own machine and for admins: call it on loopback, or over TLS with an admin certificate from the installation's CA\n",
    )
        .into_response()
}

/// A counter's value as a scrape reads it.
fn load(n: &std::sync::atomic::AtomicU64) -> u64 {
    n.load(Ordering::Relaxed)
}
