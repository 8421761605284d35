//! Which protocol generation a session speaks, chosen per server by what
//! it answers. Entry points: [`start`] (any transport) and [`start_http`].
//!
//! - **Probe** (stdio, Streamable HTTP): ask `server/discover` first. A
//!   2026-07-28 server lists its versions and the session carries them in
//!   each request's `_meta`; a server of an older generation answers with
//!   an error, and rmcp follows on the same connection with `initialize`
//!   offering 2025-11-25, which the server may lower (2025-06-18,
//!   2025-03-26, 2024-11-05).
//! - An older HTTP server may refuse the probe at the HTTP level instead
//!   (a 400 for a request without a session): [`start_http`] then opens a
//!   fresh connection that starts with `initialize`.
//! - **Initialize** only: the legacy HTTP+SSE transport, which predates
//!   discovery.
//!
//! All of it within the server's startup timeout, and every transport
//! behind the bounds on what the server may ask ([`Guarded`]).

use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::{IntoTransport, Transport};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use tokio::time::Instant;

use super::error::McpError;
use super::http::{streamable_transport, HttpTarget};
use super::server_requests::{Bounds, Guarded};

/// How a session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// `initialize` only.
    Initialize,
    /// `server/discover`, then `initialize` if the server is older.
    Probe,
}

/// The protocol versions offered through `server/discover`, newest first.
fn discover_versions() -> Vec<ProtocolVersion> {
    vec![ProtocolVersion::V_2026_07_28]
}

fn mode(lifecycle: Lifecycle) -> ClientLifecycleMode {
    match lifecycle {
        Lifecycle::Initialize => ClientLifecycleMode::Initialize,
        Lifecycle::Probe => ClientLifecycleMode::Auto {
            preferred_versions: discover_versions(),
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// `transport` behind `bounds`.
fn guarded<T, E, A>(
    transport: T,
    bounds: Bounds,
) -> Guarded<impl Transport<RoleClient, Error = E> + 'static>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    Guarded::new(transport.into_transport(), bounds)
}

/// Starts a session over `transport` within `startup`.
pub async fn start<S, T, E, A>(
    side: S,
    transport: T,
    lifecycle: Lifecycle,
    startup: Duration,
    bounds: Bounds,
) -> Result<RunningService<RoleClient, S>, McpError>
where
    S: ClientHandler,
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(
        startup,
        side.serve_with_lifecycle(guarded(transport, bounds), mode(lifecycle)),
    )
    .await
    {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(error)) => Err(handshake_error(&error)),
        Err(_) => Err(McpError::Timeout {
            what: "server startup",
            after: startup,
        }),
    }
}

/// Starts a session with a Streamable HTTP server: the probe, and when the
/// server refused it outright, `initialize` on a fresh connection.
pub async fn start_http<S>(
    side: S,
    target: HttpTarget,
    startup: Duration,
    bounds: Bounds,
) -> Result<RunningService<RoleClient, S>, McpError>
where
    S: ClientHandler + Clone,
{
    let deadline = Instant::now() + startup;
    let probe = guarded(streamable_transport(target.clone())?, bounds.clone());
    let first = tokio::time::timeout(
        startup,
        side.clone()
            .serve_with_lifecycle(probe, mode(Lifecycle::Probe)),
    )
    .await;
    match first {
        Ok(Ok(service)) => return Ok(service),
        Ok(Err(error)) if !refused_probe(&error) => return Err(handshake_error(&error)),
        Ok(Err(error)) => {
            tracing::debug!(%error, "the server refused server/discover; starting with initialize");
        }
        Err(_) => {
            return Err(McpError::Timeout {
                what: "server startup",
                after: startup,
            })
        }
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let transport = streamable_transport(target)?;
    start(side, transport, Lifecycle::Initialize, left, bounds).await
}

/// Whether the probe failed in a way an older server fails it: at the
/// HTTP level, or with an answer that is not a discovery result. An
/// authorization challenge is not one: the server wants credentials, not
/// another handshake.
fn refused_probe(error: &ClientInitializeError) -> bool {
    if error.auth_challenge().is_some() || init_auth_failure(error).is_some() {
        return false;
    }
    matches!(
        error,
        ClientInitializeError::TransportError { .. }
            | ClientInitializeError::ExpectedInitResult(_)
            | ClientInitializeError::ExpectedInitResponse(_)
            | ClientInitializeError::LegacyFallbackFailed { .. }
    )
}

fn handshake_error(error: &ClientInitializeError) -> McpError {
    if let Some(sentence) = init_auth_failure(error) {
        return McpError::Auth(sentence);
    }
    match error {
        // The fallback's error says what the older server objected to.
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            McpError::Initialize(fallback.to_string())
        }
        other => McpError::Initialize(other.to_string()),
    }
}

/// The credentials sentence of a handshake that failed on them (rmcp keeps
/// the transport's error beside the chain, not in it).
fn init_auth_failure(error: &ClientInitializeError) -> Option<String> {
    match error {
        ClientInitializeError::TransportError { error, .. } => {
            super::auth_failure::auth_failure(error.error.as_ref())
        }
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => init_auth_failure(fallback),
        _ => None,
    }
}
