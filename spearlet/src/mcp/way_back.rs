//! [`WayBack`]: where what a server sends in the middle of one call goes,
//! besides the node, when the call came from a northbound MCP client: its
//! progress, its log lines, its requests for the user's input
//! (elicitation) or for the client's model (sampling).
//!
//! The northbound handler runs the call inside [`WAY_BACK`] (a task-local,
//! so the router's call path, shared with guests, keeps its signatures);
//! the session takes it from there when it sends the call and keeps it in
//! its [`InFlight`] until the answer.
//!
//! A 2026-07-28 server asks for input in its answer instead
//! (`input_required`). For a 2026-07-28 client the answer is handed back
//! whole ([`WayBack::hand_back`]) and the client's retry resumes the call
//! ([`WayBack::resume`]); for an older client the node asks it each
//! question itself (`input_required`, through [`WayBack::elicit`] and
//! [`WayBack::sample`]).
//!
//! Progress names its call by the token the node sent, so it always finds
//! its client. Log lines and requests name no call (over stdio nothing
//! does), so they go back only while exactly one call with a way back is
//! in flight on the session; otherwise the node keeps them (its log, its
//! elicitation policy): one client never gets what another's call caused.

#![allow(deprecated)] // sampling and logging: 2025-11-25 features

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ErrorData, InputRequiredResult, InputResponses, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken,
};

/// The client of one northbound call, as the session sees it.
#[async_trait]
pub trait WayBack: Send + Sync {
    /// The call's progress, for the client under its own token.
    async fn progress(&self, progress: ProgressNotificationParam);
    /// A log line the server sent during the call.
    async fn log(&self, line: LoggingMessageNotificationParam);
    /// The server asks for the user's input; `None`: the client cannot be
    /// asked (it declared no elicitation, or its generation has no way).
    async fn elicit(&self, request: ElicitRequestParams) -> Option<ElicitResult>;
    /// The server asks for the client's model; `None`: it cannot be asked.
    async fn sample(
        &self,
        request: CreateMessageRequestParams,
    ) -> Option<Result<CreateMessageResult, ErrorData>>;

    /// What the client declared it can answer, when the server should be
    /// told that instead of the node's (a 2026-07-28 client, whose
    /// questions it answers itself).
    fn capabilities(&self) -> Option<ClientCapabilities> {
        None
    }

    /// The responses and server state a retry brings, for the call's
    /// first request to the server.
    fn resume(&self) -> Option<(Option<InputResponses>, Option<String>)> {
        None
    }

    /// The server refused the call with a JSON-RPC error, which the
    /// client is to be given as it was.
    fn refused(&self, _error: &ErrorData) {}

    /// Takes the server's `input_required` answer to give the client as
    /// it is; `false`: the node asks each question itself.
    fn hand_back(&self, _asked: &InputRequiredResult) -> bool {
        false
    }
}

tokio::task_local! {
    /// The way back of the call the current task runs, if a northbound
    /// client made it.
    pub static WAY_BACK: Arc<dyn WayBack>;
}

/// One call in flight with a way back; its token once the request is sent.
struct Call {
    id: u64,
    token: Option<ProgressToken>,
    way_back: Arc<dyn WayBack>,
}

/// The calls of one session that came from northbound clients.
#[derive(Default)]
pub(super) struct InFlight {
    calls: Mutex<Vec<Call>>,
    next: Mutex<u64>,
}

impl InFlight {
    /// Enters the current task's call, if it has a way back; before the
    /// request is sent, so nothing the server says of it comes too early.
    pub(super) fn enter(self: &Arc<Self>) -> Option<Entered> {
        let way_back = WAY_BACK.try_with(Arc::clone).ok()?;
        let id = {
            let mut next = self.next.lock();
            *next += 1;
            *next
        };
        self.calls.lock().push(Call {
            id,
            token: None,
            way_back,
        });
        Some(Entered {
            in_flight: Arc::clone(self),
            id,
        })
    }

    /// The way back of the call `token` was sent with.
    pub(super) fn by_token(&self, token: &ProgressToken) -> Option<Arc<dyn WayBack>> {
        let calls = self.calls.lock();
        let call = calls.iter().find(|c| c.token.as_ref() == Some(token))?;
        Some(Arc::clone(&call.way_back))
    }

    /// The way back of the only call in flight; `None` for none or several.
    pub(super) fn only(&self) -> Option<Arc<dyn WayBack>> {
        match self.calls.lock().as_slice() {
            [call] => Some(Arc::clone(&call.way_back)),
            _ => None,
        }
    }
}

/// A call entered in its session's [`InFlight`]; dropped, it leaves.
pub(super) struct Entered {
    in_flight: Arc<InFlight>,
    id: u64,
}

impl Entered {
    /// The progress token the request went with.
    pub(super) fn sent_with(&self, token: ProgressToken) {
        let mut calls = self.in_flight.calls.lock();
        if let Some(call) = calls.iter_mut().find(|c| c.id == self.id) {
            call.token = Some(token);
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.in_flight.calls.lock().retain(|c| c.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    /// A way back that only says who it is.
    struct Named;

    #[async_trait]
    impl WayBack for Named {
        async fn progress(&self, _: ProgressNotificationParam) {}
        async fn log(&self, _: LoggingMessageNotificationParam) {}
        async fn elicit(&self, _: ElicitRequestParams) -> Option<ElicitResult> {
            None
        }
        async fn sample(
            &self,
            _: CreateMessageRequestParams,
        ) -> Option<Result<CreateMessageResult, ErrorData>> {
            None
        }
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    #[tokio::test]
    async fn what_names_no_call_goes_back_only_while_one_call_is_in_flight() {
        let in_flight = Arc::new(InFlight::default());
        // A guest's call (no way back) enters nothing.
        assert!(in_flight.enter().is_none());
        let (a, b): (Arc<dyn WayBack>, Arc<dyn WayBack>) = (Arc::new(Named), Arc::new(Named));
        let first = WAY_BACK
            .sync_scope(Arc::clone(&a), || in_flight.enter())
            .unwrap();
        first.sent_with(token(1));
        assert!(Arc::ptr_eq(&in_flight.only().unwrap(), &a));

        // Two clients' calls at once: a log line or a request that names
        // no call reaches neither; progress still finds its own.
        let second = WAY_BACK
            .sync_scope(Arc::clone(&b), || in_flight.enter())
            .unwrap();
        second.sent_with(token(2));
        assert!(in_flight.only().is_none());
        assert!(Arc::ptr_eq(&in_flight.by_token(&token(1)).unwrap(), &a));
        assert!(Arc::ptr_eq(&in_flight.by_token(&token(2)).unwrap(), &b));
        assert!(in_flight.by_token(&token(3)).is_none());

        // Each call leaves with its answer.
        drop(first);
        assert!(in_flight.by_token(&token(1)).is_none());
        assert!(Arc::ptr_eq(&in_flight.only().unwrap(), &b));
        drop(second);
        assert!(in_flight.only().is_none());
    }
}
