//! Metrics over HTTP (`GET /metrics`), in the OpenMetrics text format
//! (written by `spear_common::metrics`), with the probes of [`crate::health`]
//! on the same port (`/livez`, `/readyz`; `/healthz` is `/livez`). Over TLS
//! when SMS has TLS, with SMS's certificate.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use spear_common::metrics::{self, Scrape};
use spear_identity::{HttpListener, TlsIdentity};
use tokio::net::TcpListener;
use tracing::warn;

use crate::files::FileProblems;
use crate::health::Health;
use crate::nodes::NodeTable;
use crate::oauth::PerPrincipal;
use crate::watch::Hub;

/// What the metrics endpoint reads from.
#[derive(Clone)]
pub struct Metrics {
    hub: Arc<Hub>,
    nodes: Arc<NodeTable>,
    problems: Arc<FileProblems>,
    /// Plaintext beyond loopback (`--insecure`).
    insecure: bool,
    /// Published here: the keys that verify nodes' workload JWTs.
    workload: Option<Arc<PerPrincipal>>,
}

impl Metrics {
    pub fn new(
        hub: Arc<Hub>,
        nodes: Arc<NodeTable>,
        problems: Arc<FileProblems>,
        insecure: bool,
    ) -> Self {
        Self {
            hub,
            nodes,
            problems,
            insecure,
            workload: None,
        }
    }

    /// Also serves SMS's workload identity documents (OpenID discovery and
    /// its keys), which authorization servers fetch: they are public.
    pub fn with_workload(mut self, workload: Option<Arc<PerPrincipal>>) -> Self {
        self.workload = workload;
        self
    }

    /// Binds `addr` and serves `/metrics` in the background (over TLS with
    /// `tls`); returns the bound address.
    pub async fn serve(
        self,
        addr: SocketAddr,
        tls: Option<TlsIdentity>,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let listener = HttpListener::new(listener, tls)?;
        let health = Health::new(Arc::clone(&self.hub), Arc::clone(&self.problems));
        let workload = self.workload.clone();
        let app = Router::new()
            .route("/livez", get(|| std::future::ready("ok\n")))
            .route(
                "/readyz",
                get(move || {
                    let health = health.clone();
                    async move {
                        match health.readiness().await {
                            Ok(()) => (StatusCode::OK, "ready\n".to_string()),
                            Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
                        }
                    }
                }),
            )
            .route(
                "/metrics",
                get(move || {
                    std::future::ready(([("content-type", metrics::CONTENT_TYPE)], self.render()))
                }),
            )
            .route("/healthz", get(|| std::future::ready("ok\n")));
        let app = match workload.as_deref().and_then(PerPrincipal::issuer) {
            Some(issuer) => {
                let discovery = axum::Json(issuer.discovery());
                let keys = axum::Json(issuer.jwks());
                app.route(
                    "/.well-known/openid-configuration",
                    get(move || std::future::ready(discovery.clone())),
                )
                .route(
                    "/.well-known/jwks.json",
                    get(move || std::future::ready(keys.clone())),
                )
            }
            None => app,
        };
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                warn!(%error, "metrics endpoint stopped");
            }
        });
        Ok(bound)
    }

    /// The current metrics in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let this = self.clone();
        metrics::render(move |m| this.scrape(m))
    }

    fn scrape(&self, m: &mut Scrape<'_>) -> std::fmt::Result {
        let (epoch, revision) = self.hub.position();
        let stats = &self.hub.stats;
        let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
        m.gauge(
            "sms_insecure",
            "1 when SMS serves plaintext beyond loopback (--insecure).",
            i64::from(self.insecure),
        )?;
        m.gauge(
            "sms_registry_revision",
            "Current registry revision.",
            revision as i64,
        )?;
        m.gauge(
            "sms_registry_epoch",
            "Current registry epoch.",
            epoch as i64,
        )?;
        m.gauge(
            "sms_registry_servers",
            "Registered MCP servers.",
            self.hub.server_count() as i64,
        )?;
        m.gauge(
            "sms_watch_streams",
            "Open watch streams.",
            stats.streams.load(Ordering::Relaxed) as i64,
        )?;
        m.counter(
            "sms_snapshot_encodes",
            "Snapshots encoded (once per revision asked for).",
            load(&stats.snapshot_encodes),
        )?;
        m.counter(
            "sms_snapshots_sent",
            "Snapshots sent to nodes.",
            load(&stats.snapshots_sent),
        )?;
        m.counter(
            "sms_deltas_sent",
            "Deltas sent to nodes.",
            load(&stats.deltas_sent),
        )?;
        m.counter(
            "sms_registry_reloads",
            "Full reloads of the registry from the store.",
            load(&stats.reloads),
        )?;
        m.counter(
            "sms_mcp_dir_scans",
            "Whole scans of the MCP server directory (after a change, and periodically).",
            self.problems.scans(),
        )?;
        m.gauge(
            "sms_file_errors",
            "Files in the MCP directory currently rejected.",
            self.problems.rejected_files() as i64,
        )?;
        let (silent, speaking) = spear_identity::dropped_for_newer();
        m.counters(
            "sms_connections_dropped_for_newer",
            "Connections dropped before their handshake ended to make room for newer ones (a flood from few addresses, or bounds too small for the fleet), by stage: silent (had sent nothing) or speaking (handshake in progress).",
            [
                (vec![("stage", "silent")], silent),
                (vec![("stage", "speaking")], speaking),
            ],
        )?;
        m.counters(
            "sms_quota_refusals",
            "Quota takes SMS refused, or counted less of than the node said, by reason: still_asking (a second ask while one is unanswered), principals (too many principals without a delegation), delegation (one not sealed for that node or principal), spent_past_grant (spent more than granted; counted up to that).",
            crate::quotas::refusals::counts().map(|(reason, n)| (vec![("reason", reason)], n)),
        )?;
        let nodes = self.nodes.status(epoch, revision);
        m.gauges(
            "sms_node_lag",
            "Registry revisions each node is behind.",
            nodes
                .iter()
                .map(|n| (vec![("node", n.node_id.as_str())], n.lag as i64)),
        )?;
        m.gauge(
            "sms_nodes_alive",
            "Nodes that sent a heartbeat recently.",
            nodes.iter().filter(|n| n.alive).count() as i64,
        )?;
        m.histogram(
            "sms_propagation_seconds",
            "From a registry change applied by SMS to a node's heartbeat saying it applied it.",
            &self.hub.propagation,
        )
    }
}
