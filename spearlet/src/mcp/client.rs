//! One MCP session with one server, over rmcp: connect (spawn + initialize
//! within the startup timeout), list tools page by page, call a tool with a
//! timeout that sends `notifications/cancelled`, and shut down cleanly.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest,
    JsonObject, PaginatedRequestParams, ProtocolVersion, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use spear_proto::v1::{ServerSpec, Transport};
use tokio::sync::watch;

use super::stdio::{StdioChild, StdioCommand};
use crate::env_refs::{ResolveError, Resolver};

/// Why talking to a server failed. Messages never carry env or header values.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("cannot start '{program}': {cause}")]
    Spawn {
        program: String,
        cause: std::io::Error,
    },
    #[error("the server did not complete the MCP handshake: {0}")]
    Initialize(String),
    #[error("{what} timed out after {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("the server connection is closed: the server exited or hung up (its stderr is in the node's log)")]
    Closed,
    #[error("the server answered with an error: {0}")]
    Server(String),
    #[error(
        "the server declares no transport; give it a \"command\" (stdio) or a \"url\" (remote)"
    )]
    NoTransport,
    #[error("tools/list returned more than {0} pages; the rest were ignored")]
    TooManyPages(usize),
    #[error("{0}")]
    InvalidHeader(String),
    #[error("server '{0}' is not in this node's registry")]
    UnknownServer(String),
    /// An error whose text held a value resolved from a `${NAME}`
    /// reference, with the value replaced by `<redacted>`.
    #[error("{0}")]
    Redacted(String),
    #[error("the server failed ({last_error}); the next restart attempt is in {retry_in:.1?}")]
    Restarting {
        last_error: String,
        retry_in: Duration,
    },
}

/// Receives server notifications; counts `tools/list_changed`.
#[derive(Clone)]
struct Notifications {
    tools_changed: Arc<watch::Sender<u64>>,
}

impl ClientHandler for Notifications {
    /// The handshake names the newest protocol version that has an
    /// `initialize` (2025-11-25): rmcp's default is its newest version,
    /// 2026-07-28, which has none, and servers refuse or misread it.
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config.client_info.name = "spearlet".into();
        config.client_info.version = env!("CARGO_PKG_VERSION").into();
        config
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.tools_changed.send_modify(|n| *n += 1);
        std::future::ready(())
    }
}

/// Timeouts of one server, with the node's defaults filled in.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub startup: Duration,
    pub list_tools: Duration,
    pub call: Duration,
}

impl Timeouts {
    /// The server's declared timeouts, or these defaults.
    pub fn for_spec(spec: &ServerSpec) -> Self {
        let t = spec.timeouts.unwrap_or_default();
        let pick = |ms: u32, default: u64| {
            Duration::from_millis(if ms == 0 { default } else { u64::from(ms) })
        };
        Self {
            startup: pick(t.startup_ms, 30_000),
            list_tools: pick(t.list_tools_ms, 10_000),
            call: pick(t.call_ms, 60_000),
        }
    }
}

/// A live MCP session.
pub struct McpClient {
    service: RunningService<RoleClient, Notifications>,
    child: Option<StdioChild>,
    tools_changed: watch::Receiver<u64>,
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

impl McpClient {
    /// Starts `spec`'s server and completes the MCP handshake.
    pub async fn connect(
        spec: &ServerSpec,
        lookup: &crate::env_refs::LookupFn<'_>,
    ) -> Result<McpClient, McpError> {
        match Transport::try_from(spec.transport).unwrap_or(Transport::Unspecified) {
            Transport::Stdio => Self::connect_stdio(spec, lookup).await,
            Transport::StreamableHttp => Self::connect_http(spec, lookup).await,
            Transport::Sse => Self::connect_sse(spec, lookup).await,
            Transport::Unspecified => Err(McpError::NoTransport),
        }
    }

    /// A Streamable HTTP server, through the node's pooled HTTP client.
    async fn connect_http(
        spec: &ServerSpec,
        lookup: &crate::env_refs::LookupFn<'_>,
    ) -> Result<McpClient, McpError> {
        let timeouts = Timeouts::for_spec(spec);
        let target = super::http::resolve_target(spec, lookup)?;
        let transport = super::http::streamable_transport(target)?;
        let (service, tools_changed) = handshake(transport, timeouts.startup).await?;
        Ok(McpClient {
            service,
            child: None,
            tools_changed,
        })
    }

    /// A legacy HTTP+SSE server (MCP 2024-11-05).
    async fn connect_sse(
        spec: &ServerSpec,
        lookup: &crate::env_refs::LookupFn<'_>,
    ) -> Result<McpClient, McpError> {
        let timeouts = Timeouts::for_spec(spec);
        let target = super::http::resolve_target(spec, lookup)?;
        let transport = super::sse::connect(target, timeouts.startup).await?;
        let (service, tools_changed) = handshake(transport, timeouts.startup).await?;
        Ok(McpClient {
            service,
            child: None,
            tools_changed,
        })
    }

    /// A local server as a supervised child process.
    async fn connect_stdio(
        spec: &ServerSpec,
        lookup: &crate::env_refs::LookupFn<'_>,
    ) -> Result<McpClient, McpError> {
        let timeouts = Timeouts::for_spec(spec);
        let (command, resolver) = stdio_command(spec, lookup)?;
        let (child, stdout, stdin) =
            StdioChild::spawn(&spec.id, &command, Arc::new(resolver.redactor())).map_err(
                |cause| McpError::Spawn {
                    program: command.program.clone(),
                    cause,
                },
            )?;
        let mut child = Some(child);
        match handshake((stdout, stdin), timeouts.startup).await {
            Ok((service, tools_changed)) => Ok(McpClient {
                service,
                child,
                tools_changed,
            }),
            Err(error) => {
                shutdown_child(&mut child).await;
                Err(error)
            }
        }
    }

    /// Every tool of the server, following `nextCursor` for at most `page_cap` pages.
    pub async fn list_tools(
        &self,
        page_cap: usize,
        timeout: Duration,
    ) -> Result<Vec<Tool>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..page_cap {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let page = tokio::time::timeout(timeout, self.service.peer().list_tools(Some(params)))
                .await
                .map_err(|_| McpError::Timeout {
                    what: "tools/list",
                    after: timeout,
                })?
                .map_err(service_error)?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(McpError::TooManyPages(page_cap))
    }

    /// Calls `tool`. On timeout the request is cancelled at the server
    /// (`notifications/cancelled`) and the call fails.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        timeout: Duration,
    ) -> Result<CallToolResult, McpError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // With a timeout option, rmcp sends `notifications/cancelled` (and
        // waits until it is sent) before reporting the timeout.
        let handle = self
            .service
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(service_error)?;
        match handle.await_response().await {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(McpError::Server("unexpected answer to tools/call".into())),
            Err(rmcp::ServiceError::Timeout { .. }) => Err(McpError::Timeout {
                what: "tools/call",
                after: timeout,
            }),
            Err(error) => Err(service_error(error)),
        }
    }

    /// Notified (with a counter) on every `notifications/tools/list_changed`.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_changed.clone()
    }

    /// True once the transport is closed (the server died or hung up).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// The protocol version the server agreed to in the handshake.
    pub fn protocol_version(&self) -> Option<String> {
        self.service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    /// The stdio server's process id, if it is a local process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(StdioChild::pid)
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

/// The MCP handshake over `transport`, within the startup timeout.
async fn handshake<T, E, A>(
    transport: T,
    startup: Duration,
) -> Result<
    (
        RunningService<RoleClient, Notifications>,
        watch::Receiver<u64>,
    ),
    McpError,
>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let (tx, tools_changed) = watch::channel(0);
    let handler = Notifications {
        tools_changed: Arc::new(tx),
    };
    match tokio::time::timeout(startup, handler.serve(transport)).await {
        Ok(Ok(service)) => Ok((service, tools_changed)),
        Ok(Err(error)) => Err(McpError::Initialize(error.to_string())),
        Err(_) => Err(McpError::Timeout {
            what: "server startup",
            after: startup,
        }),
    }
}

async fn shutdown_child(child: &mut Option<StdioChild>) {
    if let Some(child) = child.as_mut() {
        child.shutdown(Duration::from_secs(2)).await;
    }
}

fn service_error(error: rmcp::ServiceError) -> McpError {
    match error {
        rmcp::ServiceError::McpError(e) => McpError::Server(e.message.to_string()),
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => {
            McpError::Closed
        }
        rmcp::ServiceError::Timeout { timeout } => McpError::Timeout {
            what: "request",
            after: timeout,
        },
        other => McpError::Server(other.to_string()),
    }
}
