//! One server's connection, limits and state, and its calls; when it is
//! listed is `listing.rs`, what it lists `catalog.rs`, the sessions it
//! holds for people `people.rs` and `acting.rs`.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::JsonObject;
use spear_common::metrics::Histogram;
use spear_proto::v1::ServerSpec;
use tokio::sync::{watch, Semaphore};
use tracing::{info, warn, Instrument};

use super::catalog::{Catalog, Quarantined};
use super::people::People;
use super::pins::Pinning;
use super::Lookup;
use crate::env_refs::{Redactor, Resolver};
use crate::mcp::{
    render_result, McpClient, McpError, OnBehalf, RenderedResult, SessionOptions, Timeouts,
};
use spear_common::Backoff;
use spear_proto::pins::PinMode;

/// Node defaults where a server declares no limit.
const DEFAULT_MAX_CONCURRENCY: usize = 16;
const DEFAULT_MAX_OUTPUT_BYTES: usize = 200_000;

/// What an operator sees of a server on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Not connected yet, or connecting.
    Starting,
    Ready,
    /// Connected, but some tools are quarantined or the last call timed out.
    Degraded,
    /// The last attempt failed; see `last_error`. Retried with backoff.
    Failed,
}

impl ServerState {
    pub fn name(self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Degraded => "degraded",
            ServerState::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub state: ServerState,
    /// The MCP protocol version the last handshake agreed on.
    pub protocol_version: Option<String>,
    /// What confines it (stdio servers, once started).
    pub sandbox: Option<crate::mcp::Sandboxed>,
    pub last_error: Option<String>,
    pub restarts: u32,
    pub tools: usize,
    /// Tools not offered because of their schema.
    pub quarantined: Vec<Quarantined>,
    /// Tools not offered because they are not as pinned, with why.
    pub held: std::collections::BTreeMap<String, String>,
    /// Tool calls made, failed, and their total duration.
    pub calls: u64,
    pub call_errors: u64,
    pub call_seconds: f64,
    /// Their durations (shared by clones of this status).
    pub call_latency: Histogram,
    /// Requests from the server refused past their bound, over its sessions.
    pub requests_refused: u64,
}

pub(super) struct Live {
    pub(super) client: Arc<McpClient>,
    pub(super) tools_changed: watch::Receiver<u64>,
    pub(super) catalog: Option<Arc<Catalog>>,
    /// When the catalog must be listed again (the server's `ttlMs`);
    /// `None`: only when the server says its tools changed.
    pub(super) stale_at: Option<tokio::time::Instant>,
}

struct Retry {
    backoff: Backoff,
    not_before: Option<Instant>,
    failed_before: bool,
}

pub(super) struct Slot {
    pub(super) spec: ServerSpec,
    pub(super) pinning: Pinning,
    pub(super) lookup: Lookup,
    pub(super) options: SessionOptions,
    /// What the spec's references resolve to here: never said about it,
    /// and kept out of the node's log while the slot lives.
    pub(super) secrets: Arc<Redactor>,
    /// What the server's env and header references resolved to: kept out
    /// of the results the model reads ([`Slot::redact_result`]).
    handed: Redactor,
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) timeouts: Timeouts,
    max_output_bytes: usize,
    permits: Semaphore,
    pub(super) live: tokio::sync::Mutex<Option<Live>>,
    pub(super) status: parking_lot::Mutex<ServerStatus>,
    retry: parking_lot::Mutex<Retry>,
    /// Each person's own session, on a server that acts per principal.
    pub(super) people: People,
}

impl Slot {
    pub fn new(
        spec: ServerSpec,
        lookup: Lookup,
        mut options: SessionOptions,
        runtime: tokio::runtime::Handle,
        pinning: Pinning,
    ) -> Self {
        // This server's own count, not the node's shared one.
        options.requests_refused = Arc::default();
        let limits = spec.limits.unwrap_or_default();
        let max_concurrency = if limits.max_concurrency == 0 {
            DEFAULT_MAX_CONCURRENCY
        } else {
            limits.max_concurrency as usize
        };
        let max_output_bytes = if limits.max_output_bytes == 0 {
            DEFAULT_MAX_OUTPUT_BYTES
        } else {
            limits.max_output_bytes as usize
        };
        Self {
            secrets: Resolver::secrets_of(&spec, &|name| lookup(name))
                .redactor()
                .for_logs(),
            handed: Resolver::handed_to(&spec, &|name| lookup(name)).redactor(),
            timeouts: Timeouts::for_spec(&spec),
            max_output_bytes,
            permits: Semaphore::new(max_concurrency),
            live: tokio::sync::Mutex::new(None),
            status: parking_lot::Mutex::new(ServerStatus {
                state: ServerState::Starting,
                protocol_version: None,
                sandbox: None,
                last_error: None,
                restarts: 0,
                tools: 0,
                quarantined: Vec::new(),
                held: Default::default(),
                calls: 0,
                call_errors: 0,
                call_seconds: 0.0,
                call_latency: spear_common::metrics::seconds_histogram(),
                requests_refused: 0,
            }),
            retry: parking_lot::Mutex::new(Retry {
                backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(60)),
                not_before: None,
                failed_before: false,
            }),
            people: People::default(),
            spec,
            pinning,
            lookup,
            options,
            runtime,
        }
    }

    /// Connects the server with `options`, on the node's runtime: the
    /// connection's tasks live there, whichever task asked.
    pub(super) async fn connect_with(
        &self,
        options: SessionOptions,
    ) -> Result<McpClient, McpError> {
        let lookup = Arc::clone(&self.lookup);
        let spec = self.spec.clone();
        let connect = self.runtime.spawn(async move {
            McpClient::connect(&spec, &move |name| lookup(name), options).await
        });
        connect.await.unwrap_or_else(|e| {
            Err(McpError::Initialize(format!(
                "the connecting task failed: {e}"
            )))
        })
    }

    pub(super) fn pin_mode(&self) -> PinMode {
        PinMode::of(&self.spec.pin)
    }

    /// The spec the slot was made from.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// `text` with this server's secrets replaced.
    pub fn redact(&self, text: &str) -> String {
        self.secrets.redact(text).into_owned()
    }

    /// A result's `text` with the credentials the server was handed
    /// replaced, before a model reads it.
    pub fn redact_result(&self, text: String) -> String {
        match self.handed.redact(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }

    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn status(&self) -> ServerStatus {
        let mut status = self.status.lock().clone();
        status.requests_refused = self
            .options
            .requests_refused
            .load(std::sync::atomic::Ordering::Relaxed);
        status
    }

    /// `error`, with any resolved secret in its text replaced: every error
    /// leaving the slot, and every one it logs or keeps, passes here.
    pub(super) fn clean(&self, error: McpError) -> McpError {
        match self.secrets.redact(&error.to_string()) {
            Cow::Borrowed(_) => error,
            Cow::Owned(redacted) => McpError::Redacted(redacted),
        }
    }

    /// The live client, connecting if there is none and the backoff allows.
    pub(super) async fn connected(&self) -> Result<Arc<McpClient>, McpError> {
        let mut live = self.live.lock().await;
        if let Some(current) = live.as_ref() {
            if !current.client.is_closed() {
                return Ok(Arc::clone(&current.client));
            }
            let dead = live.take();
            self.failed("the server exited or closed its connection".into());
            if let Some(dead) = dead {
                self.runtime.spawn(dead.client.close());
            }
        }
        if let Some(not_before) = self.retry.lock().not_before {
            let now = Instant::now();
            if now < not_before {
                let last_error = self.status.lock().last_error.clone().unwrap_or_default();
                return Err(McpError::Restarting {
                    last_error,
                    retry_in: not_before - now,
                });
            }
        }
        self.status.lock().state = ServerState::Starting;
        match self.connect_with(self.options.clone()).await {
            Ok(client) => {
                let client = Arc::new(client);
                let mut retry = self.retry.lock();
                retry.backoff.reset();
                retry.not_before = None;
                let mut status = self.status.lock();
                if retry.failed_before {
                    status.restarts += 1;
                }
                status.state = ServerState::Ready;
                status.protocol_version = client.protocol_version();
                status.sandbox = client.sandbox().cloned();
                info!(server_id = %self.spec.id, pid = ?client.pid(), protocol = ?status.protocol_version, "MCP server connected");
                *live = Some(Live {
                    tools_changed: client.tools_changed(),
                    client: Arc::clone(&client),
                    catalog: None,
                    stale_at: None,
                });
                Ok(client)
            }
            Err(error) => {
                let error = self.clean(error);
                self.failed(error.to_string());
                Err(error)
            }
        }
    }

    pub(super) fn failed(&self, error: String) {
        let error = self.secrets.redact(&error).into_owned();
        warn!(server_id = %self.spec.id, %error, "MCP server failed");
        let mut retry = self.retry.lock();
        retry.failed_before = true;
        retry.not_before = Some(Instant::now() + retry.backoff.next_delay());
        let mut status = self.status.lock();
        status.state = ServerState::Failed;
        status.last_error = Some(error);
    }

    /// One of the server's `max_concurrency` call slots, waited for at most
    /// the call timeout.
    pub(super) async fn permit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, McpError> {
        tokio::time::timeout(self.timeouts.call, self.permits.acquire())
            .await
            .map_err(|_| McpError::Timeout {
                what: "waiting for a free call slot",
                after: self.timeouts.call,
            })?
            .map_err(|_| McpError::Closed)
    }

    /// Calls `tool` within the concurrency limit and timeout, for
    /// `on_behalf`'s person on a server that acts per principal.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        on_behalf: Option<&OnBehalf>,
    ) -> Result<RenderedResult, McpError> {
        let _permit = self.permit().await?;
        self.check_pinned(tool, on_behalf).await?;
        let started = Instant::now();
        // OpenTelemetry MCP conventions: `tools/call {tool}`, a client span.
        let span = tracing::info_span!(
            "tools/call",
            otel.name = %format!("tools/call {tool}"),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            server_id = %self.spec.id,
        );
        let outcome = self
            .call_connected(tool, arguments, on_behalf)
            .instrument(span)
            .await;
        let mut status = self.status.lock();
        status.calls += 1;
        status.call_seconds += started.elapsed().as_secs_f64();
        status.call_latency.observe(started.elapsed().as_secs_f64());
        if outcome.as_ref().map_or(true, |r| r.is_error) {
            status.call_errors += 1;
        }
        drop(status);
        outcome
    }

    /// Refuses a call to a tool that is not offered as pinned, whoever
    /// asks (a model, a guest, `spearlet mcp call`).
    async fn check_pinned(&self, tool: &str, on_behalf: Option<&OnBehalf>) -> Result<(), McpError> {
        if self.pin_mode() == PinMode::Off {
            return Ok(());
        }
        let catalog = self.catalog_for(on_behalf).await?;
        if let Some(held) = catalog.held.get(tool) {
            return Err(McpError::Held(held.sentence(&self.spec.id, tool)));
        }
        let listed = catalog.tools.iter().any(|t| t.name == tool)
            || catalog.quarantined.iter().any(|q| q.tool == tool);
        if !listed {
            return Err(McpError::NotListed {
                server: self.spec.id.clone(),
                tool: tool.to_string(),
            });
        }
        Ok(())
    }

    async fn call_connected(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        on_behalf: Option<&OnBehalf>,
    ) -> Result<RenderedResult, McpError> {
        let client = match on_behalf {
            Some(person) if self.acts_per_principal() => {
                if person.delegation.is_empty() {
                    return Err(McpError::NoDelegation(self.spec.id.clone()));
                }
                self.person(person).await?
            }
            _ => self.connected().await?,
        };
        match client.call_tool(tool, arguments, self.timeouts).await {
            Ok(result) => {
                let mut rendered = render_result(&result, self.max_output_bytes);
                if !rendered.truncated {
                    rendered.upstream = Some(Arc::new(result));
                }
                Ok(rendered)
            }
            Err(error) => {
                let error = self.clean(error);
                match &error {
                    McpError::Closed => {
                        self.failed("the server exited during a call".into());
                        // Drop the dead client, so the next use reconnects
                        // once the backoff allows instead of failing on it.
                        let mut live = self.live.lock().await;
                        if live
                            .as_ref()
                            .is_some_and(|l| Arc::ptr_eq(&l.client, &client))
                        {
                            if let Some(dead) = live.take() {
                                self.runtime.spawn(dead.client.close());
                            }
                        }
                    }
                    // A timeout, or credentials the server no longer
                    // takes (a revoked login): the session stands, but
                    // status says why calls fail.
                    McpError::Timeout { .. } | McpError::Auth(_) => {
                        let mut status = self.status.lock();
                        status.state = ServerState::Degraded;
                        status.last_error = Some(error.to_string());
                    }
                    _ => {}
                }
                Err(error)
            }
        }
    }

    /// Closes the connection (registry change or shutdown).
    pub async fn close(&self) {
        if let Some(live) = self.live.lock().await.take() {
            live.client.close().await;
        }
        self.people.close().await;
    }
}
