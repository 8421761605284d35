//! The requests of a virtual server's clients besides tools, each relayed
//! to the server it belongs to ([`super::relayed`] finds which): prompts,
//! resources and their templates, subscriptions, completions, the log
//! level. A name or URI the virtual server does not offer is answered as
//! one nobody has. Results are marked complete whatever generation the
//! server spoke (rmcp takes the mark out for an older client), as a tool's
//! are.

#![allow(deprecated)] // resources/subscribe and logging/setLevel: 2025-11-25 requests

use rmcp::model::{
    ClientRequest, CompleteRequestParams, CompleteResult, ErrorData as RpcError,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResult, Reference, ResultType,
    ServerResult, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};

use super::handler::VirtualServer;
use super::relayed::{client_error, redacted};

impl VirtualServer {
    pub(super) async fn prompts(&self) -> ListPromptsResult {
        ListPromptsResult::with_all_items(self.tools.prompts(&self.router).await.prompts)
    }

    /// A prompt of the server that has it. A 2026-07-28 server's
    /// `input_required` is handed to a `modern` client with its state
    /// sealed, as a tool call's is (`call`); the retry's state is opened
    /// and checked before it is passed on.
    pub(super) async fn prompt(
        &self,
        mut request: GetPromptRequestParams,
        modern: bool,
    ) -> Result<GetPromptResponse, RpcError> {
        let bound = format!("prompts/get {}", request.name);
        let (server, upstream) = self
            .tools
            .prompts(&self.router)
            .await
            .resolve(&request.name)
            .ok_or_else(|| unknown("prompt", &request.name))?;
        let arguments = request
            .arguments
            .clone()
            .map(|a| serde_json::Value::Object(a).to_string())
            .unwrap_or_default();
        if let Some(state) = request.request_state.take() {
            request.request_state = self
                .sealer
                .open(&state, &bound, &arguments)
                .map_err(|refused| RpcError::invalid_params(refused.to_string(), None))?;
        }
        request.name = upstream;
        let asked = ClientRequest::GetPromptRequest(rmcp::model::GetPromptRequest::new(request));
        match self.relay(&server, asked).await? {
            ServerResult::GetPromptResult(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                self.clean(&server, result).map(Into::into)
            }
            ServerResult::InputRequiredResult(asked) if modern => {
                let mut asked = self.clean(&server, asked)?;
                let upstream = asked.request_state.take();
                asked.request_state = Some(self.sealer.seal(&bound, &arguments, upstream));
                Ok(GetPromptResponse::InputRequired(asked))
            }
            ServerResult::InputRequiredResult(_) => Err(RpcError::internal_error(
                "the server asks for input to give this prompt, which a client of protocol 2025-11-25 cannot be asked here",
                None,
            )),
            _ => Err(unexpected("prompts/get")),
        }
    }

    pub(super) async fn resources(&self) -> ListResourcesResult {
        let listed = self.tools.resources(&self.router).await;
        ListResourcesResult::with_all_items(listed.into_iter().map(|(_, r)| r).collect())
    }

    pub(super) async fn templates(&self) -> ListResourceTemplatesResult {
        let listed = self.tools.templates(&self.router).await;
        ListResourceTemplatesResult::with_all_items(listed.into_iter().map(|(_, t)| t).collect())
    }

    pub(super) async fn read(
        &self,
        request: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, RpcError> {
        let server = self.resource_server(&request.uri).await?;
        let asked =
            ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(request));
        match self.relay(&server, asked).await? {
            ServerResult::ReadResourceResult(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                self.clean(&server, result)
            }
            _ => Err(unexpected("resources/read")),
        }
    }

    pub(super) async fn subscribe(&self, request: SubscribeRequestParams) -> Result<(), RpcError> {
        let server = self.resource_server(&request.uri).await?;
        let asked = ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(request));
        self.relay(&server, asked).await.map(drop)
    }

    pub(super) async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
    ) -> Result<(), RpcError> {
        let server = self.resource_server(&request.uri).await?;
        let asked =
            ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(request));
        self.relay(&server, asked).await.map(drop)
    }

    /// A completion of a prompt's or a resource template's argument, from
    /// the server that has it, under the name the server knows.
    pub(super) async fn complete(
        &self,
        mut request: CompleteRequestParams,
    ) -> Result<CompleteResult, RpcError> {
        let server = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let (server, upstream) = self
                    .tools
                    .prompts(&self.router)
                    .await
                    .resolve(&prompt.name)
                    .ok_or_else(|| unknown("prompt", &prompt.name))?;
                prompt.name = upstream;
                server
            }
            Reference::Resource(resource) => self.resource_server(&resource.uri).await?,
            _ => {
                return Err(RpcError::invalid_params(
                    "a completion's ref is a prompt or a resource",
                    None,
                ))
            }
        };
        let asked = ClientRequest::CompleteRequest(rmcp::model::CompleteRequest::new(request));
        match self.relay(&server, asked).await? {
            ServerResult::CompleteResult(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                self.clean(&server, result)
            }
            _ => Err(unexpected("completion/complete")),
        }
    }

    /// Passed to every server of the virtual server; one that has no
    /// logging is left as it is.
    pub(super) async fn set_level(&self, request: SetLevelRequestParams) {
        for server in self.tools.servers(&self.router).await {
            let asked =
                ClientRequest::SetLevelRequest(rmcp::model::SetLevelRequest::new(request.clone()));
            let _ = self.router.relay(&server, asked).await;
        }
    }

    async fn resource_server(&self, uri: &str) -> Result<String, RpcError> {
        self.tools
            .resource_server(&self.router, uri)
            .await
            .ok_or_else(|| {
                let shown = spear_common::text::prefix(uri, 256);
                let data = serde_json::json!({ "uri": shown });
                RpcError::resource_not_found(format!("Resource not found: {shown}"), Some(data))
            })
    }

    async fn relay(&self, server: &str, request: ClientRequest) -> Result<ServerResult, RpcError> {
        self.router
            .relay(server, request)
            .await
            .map_err(client_error)
    }

    fn clean<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        server: &str,
        result: T,
    ) -> Result<T, RpcError> {
        redacted(&self.router, server, result).ok_or_else(|| {
            RpcError::internal_error(
                "the server's answer was withheld: it held a secret the node could not take out",
                None,
            )
        })
    }
}

/// What a prompt nobody offers gets, naming only what the client sent.
fn unknown(what: &str, name: &str) -> RpcError {
    let shown = spear_common::text::prefix(name, 128);
    RpcError::invalid_params(format!("Unknown {what}: {shown}"), None)
}

fn unexpected(method: &str) -> RpcError {
    RpcError::internal_error(format!("the server's answer to {method} was not one"), None)
}
