//! One MCP session with one server, over rmcp: connect (spawn, then the
//! lifecycle the server's generation needs, within the startup timeout;
//! see `lifecycle`), list tools page by page, call a tool with a timeout
//! that progress restarts up to a bound and that sends
//! `notifications/cancelled` when it fires, and shut down cleanly; what
//! it answers the server is `client_side`, what it bounds of the server
//! `server_requests` and `list_bound`.

use std::sync::Arc;
use std::time::Duration;

#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, JsonObject,
    LoggingLevel, PaginatedRequestParams, RequestMetaObject, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::RoleClient;
use spear_proto::v1::{Elicitation, ServerSpec, Transport};
use tokio::sync::watch;

use super::client_side::ClientSide;
use super::error::McpError;
use super::input_required;
use super::lifecycle::{self, Lifecycle};
use super::list_bound::ListBound;
use super::options::SessionOptions;
use super::request_error::service_error;
use super::server_log::ServerLog;
use super::server_requests::Bounds;
use super::stdio::{Confined, Sandboxed, StdioChild, StdioCommand};
pub use super::timeouts::Timeouts;
use super::way_back::WAY_BACK;
use crate::env_refs::{ResolveError, Resolver};
use crate::sandbox::Decision;

/// A server's tools as one `tools/list` found them.
#[derive(Debug, Clone, Default)]
pub struct ToolList {
    /// Sorted by name.
    pub tools: Vec<Tool>,
    /// How long the list may be used before listing again: the server's
    /// `ttlMs` (2026-07-28; 0 is "already stale"). `None`: until the
    /// server says its tools changed, or the connection is made again.
    pub fresh_for: Option<Duration>,
}

/// A live MCP session.
pub struct McpClient {
    service: RunningService<RoleClient, ClientSide>,
    child: Option<StdioChild>,
    tools_changed: watch::Receiver<u64>,
    /// How much of the server's tool list is taken.
    list: Arc<ListBound>,
    /// The sealed values SMS opened for it, kept out of the log meanwhile.
    _sealed: Option<Arc<crate::env_refs::Redactor>>,
    /// The 2026-07-28 `subscriptions/listen` stream ([`super::listen`]),
    /// ended with the session.
    listening: Option<tokio::task::JoinHandle<()>>,
}

impl McpClient {
    /// Whether the session still runs (its transport is not closed).
    pub(super) fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    /// The session's side of the server, for requests of files beside this.
    pub(super) fn peer(&self) -> &rmcp::service::Peer<RoleClient> {
        self.service.peer()
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        if let Some(listening) = self.listening.take() {
            listening.abort();
        }
    }
}

/// Resolves a stdio server's command line and env on this node.
pub fn stdio_command(
    spec: &ServerSpec,
    lookup: &crate::env_refs::LookupFn<'_>,
) -> Result<(StdioCommand, Resolver), ResolveError> {
    let mut resolver = Resolver::default();
    let program = resolver.resolve("command", &spec.command, lookup)?;
    let args = spec
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| resolver.resolve(&format!("args[{i}]"), a, lookup))
        .collect::<Result<Vec<_>, _>>()?;
    let mut env: Vec<(String, String)> = Vec::with_capacity(spec.env.len());
    let mut names: Vec<&String> = spec.env.keys().collect();
    names.sort();
    for name in names {
        let value = resolver.resolve(&format!("env.{name}"), &spec.env[name], lookup)?;
        env.push((name.clone(), value));
    }
    let cwd = (!spec.cwd.is_empty()).then(|| spec.cwd.clone().into());
    Ok((
        StdioCommand {
            program,
            args,
            env,
            cwd,
        },
        resolver,
    ))
}

/// Puts `target` behind the node's egress guard: an address in its URL is
/// checked now, a name when the client resolves it.
async fn guard(
    target: &mut super::http::HttpTarget,
    options: &SessionOptions,
) -> Result<(), McpError> {
    let Some((egress, client)) = &options.egress else {
        return Ok(());
    };
    let url = reqwest::Url::parse(&target.url)
        .map_err(|_| McpError::Initialize("the server's url is not a valid URL".into()))?;
    egress
        .check_reachable(&url)
        .await
        .map_err(|refused| McpError::Egress(refused.to_string()))?;
    target.client = client.clone();
    Ok(())
}

impl McpClient {
    /// Starts `spec`'s server and completes the MCP handshake.
    pub async fn connect(
        spec: &ServerSpec,
        lookup: &crate::env_refs::LookupFn<'_>,
        options: SessionOptions,
    ) -> Result<McpClient, McpError> {
        let opened = super::sealed::open(spec, &options).await?;
        let (spec, opened_values, sealed_logs) = match &opened {
            Some(o) => (&o.spec, o.values.as_slice(), Some(Arc::clone(&o.logs))),
            None => (spec, &[][..], None),
        };
        let (tx, tools_changed) = watch::channel(0);
        let tx = Arc::new(tx);
        let side = ClientSide {
            tools_changed: Arc::clone(&tx),
            elicitation: options
                .elicitation
                .unwrap_or_else(|| Elicitation::of(spec.elicitation).into()),
            log: Arc::new(ServerLog::new(&spec.id)),
            in_flight: Arc::default(),
            sampling: options.relay_sampling,
        };
        let bounds = Bounds {
            log: Arc::clone(&side.log),
            list: Arc::new(ListBound::of(spec)),
            refused: Arc::clone(&options.requests_refused),
            sampling: options.relay_sampling,
        };
        let list = Arc::clone(&bounds.list);
        let startup = Timeouts::for_spec(spec).startup;
        let (service, child) = match Transport::try_from(spec.transport)
            .unwrap_or(Transport::Unspecified)
        {
            Transport::Stdio => {
                let how = (startup, bounds);
                Self::connect_stdio(spec, opened_values, lookup, side, how, &options).await?
            }
            Transport::StreamableHttp => {
                let mut target = super::http::resolve_target(spec, lookup)?;
                guard(&mut target, &options).await?;
                if spec.auth.is_some() {
                    let credentials = options.credentials.as_ref().ok_or(
                            McpError::NoCredentials("this process has no source of OAuth tokens (a node gets them from SMS; `spearlet mcp` logs in itself)"),
                        )?;
                    target.tokens = Some(match &options.tokens {
                        Some(person) => Arc::clone(person),
                        None => credentials.tokens(&spec.id),
                    });
                }
                let service = lifecycle::start_http(side, target, startup, bounds).await?;
                (service, None)
            }
            Transport::Sse => {
                if spec.auth.is_some() {
                    return Err(McpError::NoCredentials(
                            "OAuth is for Streamable HTTP servers; the legacy HTTP+SSE transport predates it (put a token in \"headers\" instead)",
                        ));
                }
                // HTTP+SSE is the 2024-11-05 transport: `initialize` only.
                let mut target = super::http::resolve_target(spec, lookup)?;
                guard(&mut target, &options).await?;
                let transport = super::sse::connect(target, startup).await?;
                let service =
                    lifecycle::start(side, transport, Lifecycle::Initialize, startup, bounds)
                        .await?;
                (service, None)
            }
            Transport::Unspecified => return Err(McpError::NoTransport),
        };
        let version = service
            .peer_info()
            .map(|info| info.protocol_version.to_string());
        let listening = match super::listen::spawn(
            service.peer().clone(),
            version,
            Arc::from(spec.id.as_str()),
            tx,
        ) {
            Some((task, ready)) => {
                // Not past the startup bound: a server slow to acknowledge
                // still gets its session, and the re-list bound covers it.
                let _ = tokio::time::timeout(startup, ready).await;
                Some(task)
            }
            None => None,
        };
        Ok(McpClient {
            service,
            child,
            tools_changed,
            list,
            _sealed: sealed_logs,
            listening,
        })
    }

    /// A local server as a supervised child process, started within
    /// `startup` and behind `bounds`.
    async fn connect_stdio(
        spec: &ServerSpec,
        opened: &[String],
        lookup: &crate::env_refs::LookupFn<'_>,
        side: ClientSide,
        (startup, bounds): (Duration, Bounds),
        options: &SessionOptions,
    ) -> Result<(RunningService<RoleClient, ClientSide>, Option<StdioChild>), McpError> {
        let (command, mut resolver) = stdio_command(spec, lookup)?;
        // The child's stderr never shows what SMS opened for it.
        resolver.secrets.extend(opened.iter().cloned());
        let redactor = Arc::new(resolver.redactor());
        let spawn_unconfined = |command: &StdioCommand, redactor| {
            StdioChild::spawn(&spec.id, command, redactor).map_err(|cause| McpError::Spawn {
                program: command.program.clone(),
                cause,
            })
        };
        let (child, stdout, stdin) = match &options.sandbox {
            None => spawn_unconfined(&command, redactor)?,
            Some(sandboxing) => match sandboxing.prepare(spec, command).await {
                (command, Decision::Confine { launcher, plan }) => {
                    let confined = Confined {
                        launcher: &launcher,
                        plan: &plan,
                        egress: sandboxing.egress.as_ref(),
                        within: startup,
                    };
                    StdioChild::spawn_confined(&spec.id, &command, redactor, confined).await?
                }
                (_, Decision::Refused(why)) => return Err(McpError::Sandbox(why)),
                (command, Decision::Off) => {
                    tracing::warn!(server_id = %spec.id, "server runs UNCONFINED: its file says \"sandbox\": \"off\" and this node's policy allows it; it can read and do whatever this node's user can");
                    let mut spawned = spawn_unconfined(&command, redactor)?;
                    spawned.0.mark_off();
                    spawned
                }
            },
        };
        let mut child = Some(child);
        let pipes = super::stdio_frames::pipes(
            stdout,
            stdin,
            Arc::clone(&bounds.list),
            Arc::clone(&side.log),
        );
        match lifecycle::start(side, pipes, Lifecycle::Probe, startup, bounds).await {
            Ok(service) => Ok((service, child)),
            Err(error) => {
                shutdown_child(&mut child).await;
                Err(error)
            }
        }
    }

    /// Every tool of the server, following `nextCursor` for at most
    /// `page_cap` pages, sorted by name so the tools a model is offered
    /// come in the same order whatever order the server lists them in
    /// (stable prompts, and prompt caches that keep working). A list past
    /// the server's `ListBound` is refused, and what was collected of it
    /// dropped at once.
    pub async fn list_tools(
        &self,
        page_cap: usize,
        timeout: Duration,
    ) -> Result<ToolList, McpError> {
        let mut tools = Vec::new();
        let mut fresh_for: Option<Duration> = None;
        let mut cursor: Option<String> = None;
        for _ in 0..page_cap {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let page = tokio::time::timeout(timeout, self.service.peer().list_tools(Some(params)))
                .await
                .map_err(|_| McpError::Timeout {
                    what: "tools/list",
                    after: timeout,
                })?
                .map_err(|error| match self.list.take_refusal() {
                    Some(sentence) => McpError::ListRefused(sentence),
                    None => service_error(error),
                })?;
            // A list is as fresh as its least fresh page.
            if let Some(ttl) = page.ttl_ms.map(Duration::from_millis) {
                fresh_for = Some(fresh_for.map_or(ttl, |f| f.min(ttl)));
            }
            self.list
                .check(tools.len().saturating_add(page.tools.len()))
                .map_err(McpError::ListRefused)?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => {
                    tools.sort_by(|a, b| a.name.cmp(&b.name));
                    return Ok(ToolList { tools, fresh_for });
                }
            }
        }
        Err(McpError::TooManyPages(page_cap))
    }

    /// Calls `tool`. Each progress notification restarts `timeouts.call`,
    /// up to `timeouts.call_max` in all; on timeout the request is
    /// cancelled at the server (`notifications/cancelled`) and the call
    /// fails. A 2026-07-28 `input_required` answer is fulfilled (by the
    /// elicitation policy) and the call retried, a bounded number of times.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        timeouts: Timeouts,
    ) -> Result<CallToolResult, McpError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let started = tokio::time::Instant::now();
        // Before the request is sent, so nothing the server says of it
        // comes before its way back is known.
        let way_back = self.service.service().in_flight.enter();
        let client = WAY_BACK.try_with(Arc::clone).ok();
        if let Some((responses, state)) = client.as_ref().and_then(|c| c.resume()) {
            params.input_responses = responses;
            params.request_state = state;
        }
        let mut meta = log_opt_in();
        if let Some(declared) = client.as_ref().and_then(|c| c.capabilities()) {
            meta.set_client_capabilities(declared);
        }
        for _ in 0..input_required::MAX_ROUNDS {
            let left = timeouts.call_max.saturating_sub(started.elapsed());
            let options = PeerRequestOptions::with_timeout(timeouts.call.min(left))
                .reset_timeout_on_progress()
                .with_max_total_timeout(left)
                .with_meta(meta.clone());
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            // With a timeout option, rmcp sends `notifications/cancelled` (and
            // waits until it is sent) before reporting the timeout.
            let handle = self
                .service
                .peer()
                .send_cancellable_request(request, options)
                .await
                .map_err(|error| self.request_error(error))?;
            if let Some(way_back) = &way_back {
                way_back.sent_with(handle.progress_token.clone());
            }
            match handle.await_response().await {
                Ok(ServerResult::CallToolResult(result)) => return Ok(result),
                Ok(ServerResult::InputRequiredResult(asked)) => {
                    if client.as_ref().is_some_and(|c| c.hand_back(&asked)) {
                        return Err(McpError::InputHandedBack);
                    }
                    let side = self.service.service();
                    let asking = input_required::Asking {
                        log: &side.log,
                        policy: side.elicitation,
                        client: client.as_deref(),
                    };
                    let (responses, state) = input_required::fulfil(asking, asked).await?;
                    params.input_responses = responses;
                    params.request_state = state;
                }
                Ok(_) => return Err(McpError::Server("unexpected answer to tools/call".into())),
                Err(rmcp::ServiceError::Timeout { .. }) => {
                    // Either the call went quiet for its timeout, or it
                    // reported progress until its bound.
                    let at_bound = started.elapsed() >= timeouts.call_max;
                    return Err(McpError::Timeout {
                        what: if at_bound {
                            "tools/call (at its call_max bound)"
                        } else {
                            "tools/call"
                        },
                        after: if at_bound {
                            timeouts.call_max
                        } else {
                            timeouts.call
                        },
                    });
                }
                // The server's own refusal, which a northbound client is
                // given as it was.
                Err(rmcp::ServiceError::McpError(error)) if client.is_some() => {
                    if let Some(client) = &client {
                        client.refused(&error);
                    }
                    return Err(McpError::Rpc(error));
                }
                // rmcp answers a request whose own response stream ended
                // (one the node cut at its bound, `stream_budget`) as if
                // the transport closed; the session itself is still up.
                Err(error) => return Err(self.request_error(error)),
            }
        }
        Err(McpError::Server(format!(
            "the server asked for input {} times without answering; the call was given up",
            input_required::MAX_ROUNDS
        )))
    }

    /// Notified (with a counter) on every `notifications/tools/list_changed`.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_changed.clone()
    }

    /// Closes a session others may still hold: shut down cleanly when
    /// this is the last handle; otherwise calls still hold it, and killing
    /// the server's process group ends them at once.
    pub async fn close(self: Arc<Self>) {
        match Arc::try_unwrap(self) {
            Ok(client) => client.shutdown().await,
            Err(shared) => shared.kill(),
        }
    }

    /// True once the transport is closed (the server died or hung up).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// The protocol version agreed with the server: in the `initialize`
    /// handshake, or chosen from what `server/discover` listed.
    pub fn protocol_version(&self) -> Option<String> {
        self.service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    /// The stdio server's process id, if it is a local process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(StdioChild::pid)
    }

    /// What confines a stdio server; `None` for a remote server.
    pub fn sandbox(&self) -> Option<&Sandboxed> {
        self.child.as_ref().map(StdioChild::sandbox)
    }

    /// Kills the server's process group now (calls in flight fail at once).
    pub fn kill(&self) {
        if let Some(child) = self.child.as_ref() {
            child.kill();
        }
    }

    /// Closes the session: stdin first, then the process group.
    pub async fn shutdown(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.service.close()).await;
        shutdown_child(&mut self.child).await;
    }
}

/// At 2026-07-28 a server sends log notifications only for requests that
/// ask for them (`_meta` log level); earlier versions send them anyway.
/// Info and above: what a server says at debug is for its own developers.
#[allow(deprecated)] // logging: see server_log
fn log_opt_in() -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    meta.set_log_level(LoggingLevel::Info);
    // The tool call's span, so the server can join the trace.
    if let Some(traceparent) = spear_common::telemetry::traceparent() {
        meta.0.insert("traceparent".into(), traceparent.into());
    }
    meta
}

async fn shutdown_child(child: &mut Option<StdioChild>) {
    if let Some(child) = child.as_mut() {
        child.shutdown(Duration::from_secs(2)).await;
    }
}
