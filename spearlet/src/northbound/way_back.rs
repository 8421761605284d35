//! [`ClientWay`]: the MCP client of one northbound call, as the server's
//! session sees it ([`crate::mcp::WayBack`]): the call's progress under
//! the client's own token, the server's log lines, and its requests for
//! the user's input or the client's model, each redacted of the server's
//! secrets on the way. Requests and log lines reach only a 2025-11-25
//! session (a 2026-07-28 request has no way back for them but its own
//! answer), and requests only when the client declared the capability.

#![allow(deprecated)] // logging and sampling: 2025-11-25 features

use async_trait::async_trait;
use rmcp::model::{
    ClientResult, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, ErrorData, LoggingMessageNotificationParam,
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
        }
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
