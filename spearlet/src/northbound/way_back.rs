//! [`ClientWay`]: the MCP client of one northbound call, as the server's
//! session sees it ([`crate::mcp::WayBack`]): the call's progress under
//! the client's own token, the server's log lines, and its requests for
//! the user's input or the client's model, each redacted of the server's
//! secrets on the way. Requests and log lines reach only a 2025-11-25
//! session, and requests only when the client declared the capability. A
//! 2026-07-28 request has no way back but its own answer: a server's
//! `input_required` is handed back to it whole (its state sealed by the
//! handler), the server is told the client's own capabilities, and the
//! client's retry resumes the call.

#![allow(deprecated)] // logging and sampling: 2025-11-25 features

use async_trait::async_trait;
use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, ErrorData,
    InputRequiredResult, InputResponses, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, ServerRequest,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::RoleServer;

use super::relayed::redacted;
use crate::mcp::WayBack;
use crate::tools::Router;

/// One northbound call's client.
pub struct ClientWay {
    peer: Peer<RoleServer>,
    /// The client's token for the call, if it asked for progress.
    token: Option<ProgressToken>,
    /// A 2025-11-25 session: it may be sent log lines and requests.
    session: bool,
    elicitation: bool,
    sampling: bool,
    router: Router,
    server: String,
    /// A 2026-07-28 client's declared capabilities.
    declared: Option<ClientCapabilities>,
    /// What the client's retry brings for the server.
    resume: Option<(Option<InputResponses>, Option<String>)>,
    /// The server's `input_required`, handed back.
    handed: Mutex<Option<InputRequiredResult>>,
    /// The server's JSON-RPC refusal of the call.
    refusal: Mutex<Option<ErrorData>>,
}

impl ClientWay {
    /// The client of the call `context` is, calling a tool of `server`.
    pub fn of(context: &RequestContext<RoleServer>, router: &Router, server: &str) -> Self {
        // A 2026-07-28 request names its protocol in its `_meta`.
        let session = context.meta.protocol_version().is_none();
        let declared = context
            .peer
            .peer_info()
            .map(|info| info.capabilities.clone());
        Self {
            peer: context.peer.clone(),
            token: context.meta.get_progress_token(),
            session,
            elicitation: declared.as_ref().is_some_and(|c| c.elicitation.is_some()),
            sampling: declared.as_ref().is_some_and(|c| c.sampling.is_some()),
            router: router.clone(),
            server: server.to_string(),
            declared: context.meta.client_capabilities().filter(|_| !session),
            resume: None,
            handed: Mutex::new(None),
            refusal: Mutex::new(None),
        }
    }

    /// This call resumes one the server asked questions of.
    pub fn resuming(mut self, resume: Option<(Option<InputResponses>, Option<String>)>) -> Self {
        self.resume = resume;
        self
    }

    /// The server's `input_required`, if it was handed back.
    pub fn handed_back(&self) -> Option<InputRequiredResult> {
        self.handed.lock().take()
    }

    /// The server's JSON-RPC refusal of the call, if it refused it.
    pub fn refusal(&self) -> Option<ErrorData> {
        self.refusal.lock().take()
    }

    fn clean<T: serde::Serialize + serde::de::DeserializeOwned>(&self, value: T) -> Option<T> {
        redacted(&self.router, &self.server, value)
    }
}

#[async_trait]
impl WayBack for ClientWay {
    async fn progress(&self, mut progress: ProgressNotificationParam) {
        let Some(token) = &self.token else {
            return;
        };
        progress.progress_token = token.clone();
        if let Some(progress) = self.clean(progress) {
            let _ = self.peer.notify_progress(progress).await;
        }
    }

    async fn log(&self, line: LoggingMessageNotificationParam) {
        if !self.session {
            return;
        }
        if let Some(line) = self.clean(line) {
            let _ = self.peer.notify_logging_message(line).await;
        }
    }

    async fn elicit(&self, request: ElicitRequestParams) -> Option<ElicitResult> {
        if !(self.session && self.elicitation) {
            return None;
        }
        let asked = ServerRequest::ElicitRequest(ElicitRequest::new(self.clean(request)?));
        match self.peer.send_request(asked).await {
            Ok(ClientResult::ElicitResult(answer)) => Some(answer),
            _ => None,
        }
    }

    fn capabilities(&self) -> Option<ClientCapabilities> {
        self.declared.clone()
    }

    fn resume(&self) -> Option<(Option<InputResponses>, Option<String>)> {
        self.resume.clone()
    }

    fn refused(&self, error: &ErrorData) {
        *self.refusal.lock() = self.clean(error.clone());
    }

    /// A 2026-07-28 client answers for itself.
    fn hand_back(&self, asked: &InputRequiredResult) -> bool {
        if self.session {
            return false;
        }
        *self.handed.lock() = self.clean(asked.clone());
        true
    }

    async fn sample(
        &self,
        request: CreateMessageRequestParams,
    ) -> Option<Result<CreateMessageResult, ErrorData>> {
        if !(self.session && self.sampling) {
            return None;
        }
        let asked =
            ServerRequest::CreateMessageRequest(CreateMessageRequest::new(self.clean(request)?));
        Some(match self.peer.send_request(asked).await {
            Ok(ClientResult::CreateMessageResult(answer)) => Ok(*answer),
            Ok(_) => Err(ErrorData::internal_error(
                "the client's answer to sampling was not one",
                None,
            )),
            Err(rmcp::ServiceError::McpError(error)) => Err(error),
            Err(error) => Err(ErrorData::internal_error(
                format!("the client did not answer: {error}"),
                None,
            )),
        })
    }
}
