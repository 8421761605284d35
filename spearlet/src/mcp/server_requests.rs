//! What a server may ask of the node, bounded: every session's transport
//! passes through [`Guarded`], which answers the server's own requests
//! (`ping`, `roots/list`, `elicitation/create`, and any other) only up to
//! [`MAX_REQUESTS_PER_SECOND`]; past that each is answered at once with a
//! JSON-RPC error, counted (`spearlet_mcp_server_requests_refused`) and
//! said in the node's log once a minute. `sampling/createMessage` within
//! the bound is answered with an error here unless the session declared
//! sampling (it relays it to northbound clients, `way_back`): nodes
//! sample no model for servers, and answering it here keeps rmcp from
//! logging a warning per request.
//!
//! It also tells the session's [`ListBound`] which requests are
//! `tools/list`, so their answers are weighed before they are parsed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, ServerRequest};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::time::Instant;

use super::list_bound::ListBound;
use super::server_log::ServerLog;

/// Requests per second one server's session answers, at most.
pub const MAX_REQUESTS_PER_SECOND: u32 = 20;
/// Error answers on their way to one server at once, at most: past that
/// the next is awaited before the server's next message is read.
const MAX_ANSWERS_IN_FLIGHT: usize = 64;

/// What one session shares with the node about its server's requests.
#[derive(Debug, Clone)]
pub struct Bounds {
    pub log: Arc<ServerLog>,
    pub list: Arc<ListBound>,
    /// Requests refused past the bound, for the node's metrics (kept
    /// across the server's sessions by whoever holds it).
    pub refused: Arc<AtomicU64>,
    /// The session declared sampling: its requests reach the session.
    pub sampling: bool,
}

/// A transport whose server's requests are bounded.
pub struct Guarded<T> {
    inner: T,
    bounds: Bounds,
    window: Instant,
    answered: u32,
    in_flight: Arc<AtomicUsize>,
}

impl<T> Guarded<T> {
    pub fn new(inner: T, bounds: Bounds) -> Self {
        Guarded {
            inner,
            bounds,
            window: Instant::now(),
            answered: 0,
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Why `request` is refused, if it is: past the bound, or a request
    /// to sample a model.
    fn refusal(&mut self, request: &ServerRequest) -> Option<ErrorData> {
        if self.window.elapsed() >= Duration::from_secs(1) {
            (self.window, self.answered) = (Instant::now(), 0);
        }
        if self.answered >= MAX_REQUESTS_PER_SECOND {
            return Some(self.past_the_bound());
        }
        self.answered += 1;
        let ServerRequest::CreateMessageRequest(_) = request else {
            return None;
        };
        if self.bounds.sampling {
            return None;
        }
        self.bounds.log.request(|server_id| {
            tracing::info!(server_id, "the server asked the node to sample a model; refused: nodes sample no model for servers")
        });
        Some(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "this node does not sample models for servers (sampling/createMessage)",
            None,
        ))
    }

    /// Counts a request past the bound, says so once a minute, and the
    /// error it is answered with.
    fn past_the_bound(&self) -> ErrorData {
        let refused = self.bounds.refused.fetch_add(1, Ordering::Relaxed) + 1;
        self.bounds.log.refusal(|server_id| {
            tracing::warn!(
                server_id,
                refused,
                "server '{server_id}' sent more requests than the node answers ({MAX_REQUESTS_PER_SECOND} a second); the others are answered with an error (said once a minute)"
            )
        });
        ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            format!("too many requests: this node answers {MAX_REQUESTS_PER_SECOND} requests a second from a server"),
            None,
        )
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Guarded<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.bounds.list.sent(&item);
        self.inner.send(item)
    }

    /// The next message for the session; a refused request is answered
    /// here and never reaches it. Nothing is awaited between taking a
    /// message and returning it, so a receive cancelled by the session's
    /// loop loses no message.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            let JsonRpcMessage::Request(request) = &message else {
                return Some(message);
            };
            let Some(error) = self.refusal(&request.request) else {
                return Some(message);
            };
            let answer = self
                .inner
                .send(JsonRpcMessage::error(error, Some(request.id.clone())));
            if self.in_flight.load(Ordering::Relaxed) >= MAX_ANSWERS_IN_FLIGHT {
                // The server sends faster than it reads: it waits for
                // its answers (an answer is lost if the session's loop
                // cancels this receive meanwhile).
                let _ = answer.await;
                continue;
            }
            let in_flight = Arc::clone(&self.in_flight);
            in_flight.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = answer.await;
                in_flight.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
