//! The order of a session's first streams. Entry point: [`StandaloneFirst`].
//!
//! After `initialize`, rmcp opens the session's standalone GET stream (the
//! one a server sends its own requests and notifications on) in a task of
//! its own, while the caller's first request goes out at once. On a loaded
//! machine the GET can then arrive after a tool call. A server that sends a
//! request on the standalone stream during that call (an elicitation)
//! finds no stream, and one that resumes a closed response stream on the
//! next GET takes the standalone stream for the resumption (the MCP
//! conformance suite's `sse-retry` server does), so the client never sends
//! the `Last-Event-ID` the spec asks for.
//!
//! So a session's requests wait until its standalone stream has been
//! answered (opened or refused), at most [`STANDALONE_WAIT`]: a server
//! that never answers the GET delays the first request by that, and no more.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use tokio::sync::watch;

/// The longest a request waits for its session's standalone stream.
pub const STANDALONE_WAIT: Duration = Duration::from_secs(2);

/// Which session's standalone stream the server has answered, shared by
/// the clones of one transport's HTTP client.
#[derive(Clone)]
pub struct StandaloneFirst {
    answered: Arc<watch::Sender<Option<Arc<str>>>>,
}

impl Default for StandaloneFirst {
    fn default() -> Self {
        StandaloneFirst {
            answered: Arc::new(watch::Sender::new(None)),
        }
    }
}

impl StandaloneFirst {
    /// Waits, before `message` is posted in `session`, until that
    /// session's standalone stream has been answered. Only requests wait
    /// (not `initialize`, notifications or responses), and only in a
    /// session: a stateless server has no standalone stream.
    pub async fn before_post(&self, message: &ClientJsonRpcMessage, session: Option<&str>) {
        let Some(session) = session else { return };
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        if matches!(request.request, ClientRequest::InitializeRequest(_)) {
            return;
        }
        let mut answered = self.answered.subscribe();
        let wait = answered.wait_for(|s| s.as_deref() == Some(session));
        // Past the wait the request goes anyway: ordering is a courtesy to
        // the server, never a reason to fail a call.
        let _ = tokio::time::timeout(STANDALONE_WAIT, wait).await;
    }

    /// Records that the server answered `session`'s standalone stream (a
    /// GET without `Last-Event-ID`), whatever it answered.
    pub fn answered(&self, session: Option<&str>, last_event_id: Option<&str>) {
        if let (Some(session), None) = (session, last_event_id) {
            self.answered.send_replace(Some(session.into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        ClientNotification, InitializedNotification, ListToolsRequest, NumberOrString,
    };

    fn list_tools() -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::ListToolsRequest(ListToolsRequest::default()),
            NumberOrString::Number(1),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_its_sessions_standalone_stream() {
        let order = StandaloneFirst::default();
        let waiting = tokio::spawn({
            let order = order.clone();
            async move { order.before_post(&list_tools(), Some("s1")).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        // A resumption of another stream does not count, nor another session.
        order.answered(Some("s1"), Some("event-1"));
        order.answered(Some("s0"), None);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        order.answered(Some("s1"), None);
        waiting.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_never_answers_delays_a_request_by_the_bound_only() {
        let order = StandaloneFirst::default();
        let started = tokio::time::Instant::now();
        order.before_post(&list_tools(), Some("s1")).await;
        assert_eq!(started.elapsed(), STANDALONE_WAIT);
    }

    #[tokio::test(start_paused = true)]
    async fn notifications_and_stateless_requests_do_not_wait() {
        let order = StandaloneFirst::default();
        let started = tokio::time::Instant::now();
        let initialized = ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(InitializedNotification::default()),
        );
        order.before_post(&initialized, Some("s1")).await;
        order.before_post(&list_tools(), None).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
