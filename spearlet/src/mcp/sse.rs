//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp has no client
//! for: a long-lived `GET` event stream whose first `endpoint` event names
//! the URL to `POST` every client message to; the server's messages arrive
//! as `message` events on the stream. The stream is one long-lived
//! session, so its events are bounded per minute ([`Budget::per_minute`]):
//! past the bound the node closes it, which ends the session.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::channel::mpsc as fmpsc;
use futures::{Stream, StreamExt};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::RoleClient;
use spear_common::sse::Parser;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tracing::{debug, warn, Instrument};

use super::error::McpError;
use super::http::HttpTarget;
use super::stream_budget::Budget;
use crate::http_client::describe;

/// Bytes buffered for one SSE event at most (rmcp's bound for Streamable HTTP).
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The client side of a legacy SSE session, ready for rmcp.
pub type SseTransport = (fmpsc::Sender<TxJsonRpcMessage<RoleClient>>, SseStream);

/// Incoming messages; dropping it stops the session's background tasks.
pub struct SseStream {
    inner: ReceiverStream<RxJsonRpcMessage<RoleClient>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Stream for SseStream {
    type Item = RxJsonRpcMessage<RoleClient>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

impl Drop for SseStream {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Opens the event stream and waits (up to `timeout`) for the endpoint.
pub async fn connect(target: HttpTarget, timeout: Duration) -> Result<SseTransport, McpError> {
    let client = target.client.clone();
    let mut request = client
        .get(&target.url)
        .header("accept", "text/event-stream");
    for (name, value) in &target.headers {
        request = request.header(name, value);
    }
    let response = tokio::time::timeout(timeout, request.send())
        .await
        .map_err(|_| McpError::Timeout {
            what: "opening the SSE stream",
            after: timeout,
        })?
        .map_err(|e| {
            McpError::Initialize(format!("cannot open the SSE stream: {}", describe(e)))
        })?;
    if !response.status().is_success() {
        return Err(McpError::Initialize(format!(
            "the SSE endpoint answered {}",
            response.status()
        )));
    }
    let base = response.url().clone();
    // The node posts (with the server's secret headers) only to the origin
    // the operator declared.
    let origin = reqwest::Url::parse(&target.url)
        .map(|url| url.origin())
        .unwrap_or_else(|_| base.origin());
    let (incoming_tx, incoming_rx) = mpsc::channel(64);
    let (endpoint_tx, endpoint_rx) = oneshot::channel();
    let reader = tokio::spawn(
        read_events(response, base, endpoint_tx, incoming_tx.clone())
            .instrument(tracing::Span::current()),
    );
    let endpoint = match tokio::time::timeout(timeout, endpoint_rx).await {
        Ok(Ok(endpoint)) if endpoint.origin() == origin => endpoint,
        Ok(Ok(endpoint)) => {
            reader.abort();
            return Err(McpError::Initialize(format!(
                "the SSE server named an endpoint on another origin ({}); the node posts only to the origin of the server's url",
                endpoint.origin().ascii_serialization()
            )));
        }
        Ok(Err(_)) => {
            reader.abort();
            return Err(McpError::Initialize(
                "the SSE stream ended before naming its endpoint".into(),
            ));
        }
        Err(_) => {
            reader.abort();
            return Err(McpError::Timeout {
                what: "waiting for the SSE endpoint event",
                after: timeout,
            });
        }
    };
    debug!(%endpoint, "legacy SSE endpoint");
    let (outgoing_tx, outgoing_rx) = fmpsc::channel(64);
    let writer = tokio::spawn(post_messages(endpoint, target, outgoing_rx));
    Ok((
        outgoing_tx,
        SseStream {
            inner: ReceiverStream::new(incoming_rx),
            tasks: vec![reader, writer],
        },
    ))
}

/// Parses the event stream: the first `endpoint` event, then `message`s.
async fn read_events(
    response: reqwest::Response,
    base: reqwest::Url,
    endpoint: oneshot::Sender<reqwest::Url>,
    incoming: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) {
    let mut endpoint = Some(endpoint);
    let mut body = response.bytes_stream();
    let mut parser = Parser::default();
    let mut budget = Budget::per_minute();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { break };
        for event in parser.feed(&chunk) {
            if let Err(flood) = budget.spend(event.data.len()) {
                warn!("{flood}; closing the SSE session");
                return;
            }
            match event.name.as_str() {
                "endpoint" => match (endpoint.take(), base.join(event.data.trim())) {
                    (Some(tx), Ok(url)) => {
                        let _ = tx.send(url);
                    }
                    (_, Err(error)) => warn!(%error, "the SSE endpoint event is not a URL"),
                    (None, Ok(_)) => {}
                },
                "" | "message" => {
                    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&event.data) {
                        Ok(message) => {
                            if incoming.send(message).await.is_err() {
                                return;
                            }
                        }
                        Err(error) => warn!(%error, "ignoring a malformed SSE message"),
                    }
                }
                _ => {}
            }
        }
        if parser.pending() > MAX_EVENT_BYTES {
            warn!("an SSE event exceeded {MAX_EVENT_BYTES} bytes; closing the stream");
            break;
        }
    }
}

/// Posts every client message to the endpoint, in order.
async fn post_messages(
    endpoint: reqwest::Url,
    target: HttpTarget,
    mut outgoing: fmpsc::Receiver<TxJsonRpcMessage<RoleClient>>,
) {
    let client = target.client.clone();
    while let Some(message) = outgoing.next().await {
        let body = match serde_json::to_vec(&message) {
            Ok(body) => body,
            Err(error) => {
                warn!(%error, "cannot encode a message for the SSE server");
                continue;
            }
        };
        let mut request = client
            .post(endpoint.clone())
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in &target.headers {
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => warn!(status = %response.status(), "the SSE server refused a message"),
            Err(error) => {
                warn!(error = %describe(error), "cannot post to the SSE server");
                return;
            }
        }
    }
}
