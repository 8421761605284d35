//! [`VirtualServer`]: one virtual server as an MCP server (rmcp's
//! `ServerHandler`). Each request computes the listing afresh, so a list
//! and the call after it are decided by the same code and the same state:
//! a tool the policy, a pin or a collision keeps out is not listed, and a
//! call of it answers exactly as a call of a name nobody has.

#![allow(deprecated)] // logging and resources/subscribe: 2025-11-25 requests

use std::sync::Arc;

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tracing::{info_span, Instrument};

use super::changes::Clients;
use super::listing::VirtualTools;
use super::request_state::Sealer;
use crate::tools::Router;

/// One virtual server served through a node's router.
#[derive(Clone)]
pub struct VirtualServer {
    pub(super) tools: Arc<VirtualTools>,
    pub(super) router: Router,
    /// Its clients told of changes, shared by every session's clone.
    pub(super) clients: Arc<Clients>,
    /// Seals the request states its 2026-07-28 clients are given.
    pub(super) sealer: Arc<Sealer>,
}

impl VirtualServer {
    pub fn new(tools: VirtualTools, router: Router) -> Self {
        Self {
            tools: Arc::new(tools),
            router,
            clients: Arc::default(),
            sealer: Arc::default(),
        }
    }

    /// Its name, the `<name>` of `/v/<name>/mcp`.
    pub fn name(&self) -> &str {
        &self.tools.spec().name
    }
}

impl ServerHandler for VirtualServer {
    fn get_info(&self) -> ServerConfig {
        let spec = self.tools.spec();
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .build();
        let mut info = ServerConfig::new(capabilities);
        info.server_info =
            Implementation::new(format!("spear/{}", spec.name), env!("CARGO_PKG_VERSION"));
        if !spec.description.is_empty() {
            info = info.with_instructions(spec.description.clone());
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let span = info_span!("northbound_list", virtual_server = %self.name());
        let listing = self.tools.list(&self.router).instrument(span).await;
        Ok(ListToolsResult::with_all_items(listing.tools))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.clients.session(context.peer);
    }

    /// Tool changes only: prompts and resources are relayed as they are
    /// asked for, and their changes are not followed yet.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        if context.accepted().tools_list_changed == Some(true) {
            self.clients.listening(context.sink().clone());
        }
        context.cancelled().await;
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(self.prompts().await)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        // A 2026-07-28 request names its protocol in its `_meta`.
        let modern = context.meta.protocol_version().is_some();
        self.prompt(request, modern).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(self.resources().await)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(self.templates().await)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read(request).await.map(Into::into)
    }

    #[allow(deprecated)] // 2025-11-25
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        VirtualServer::subscribe(self, request).await
    }

    #[allow(deprecated)] // 2025-11-25
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        VirtualServer::unsubscribe(self, request).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        VirtualServer::complete(self, request).await
    }

    #[allow(deprecated)] // 2025-11-25
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        VirtualServer::set_level(self, request).await;
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let span = info_span!("northbound_call", virtual_server = %self.name(), tool = %spear_common::text::prefix(&request.name, 64));
        self.call(request, &context).instrument(span).await
    }
}
