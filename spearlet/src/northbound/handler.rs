//! [`VirtualServer`]: one virtual server as an MCP server (rmcp's
//! `ServerHandler`). Each request computes the listing afresh, so a list
//! and the call after it are decided by the same code and the same state:
//! a tool the policy, a pin or a collision keeps out is not listed, and a
//! call of it answers exactly as a call of a name nobody has.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tracing::{info_span, Instrument};

use super::listing::VirtualTools;
use super::result::client_result;
use crate::tools::Router;

/// One virtual server served through a node's router.
#[derive(Clone)]
pub struct VirtualServer {
    tools: Arc<VirtualTools>,
    router: Router,
}

impl VirtualServer {
    pub fn new(tools: VirtualTools, router: Router) -> Self {
        Self {
            tools: Arc::new(tools),
            router,
        }
    }

    /// Its name, the `<name>` of `/v/<name>/mcp`.
    pub fn name(&self) -> &str {
        &self.tools.spec().name
    }

    /// Runs `name` with `arguments`, or refuses it as unknown.
    async fn call(&self, name: &str, arguments: String) -> Result<CallToolResult, McpError> {
        let listing = self.tools.list(&self.router).await;
        let allowed = listing
            .resolve(name)
            .and_then(|target| self.tools.allow(&self.router, target).ok())
            .ok_or_else(|| unknown_tool(name))?;
        let outcome = self
            .router
            .run(self.tools.task(), allowed, &arguments)
            .await;
        Ok(client_result(&self.router, &outcome))
    }
}

/// What a call of a tool this virtual server does not offer gets, whether
/// it exists elsewhere, is denied or held, or was never anything: the
/// JSON-RPC error the MCP spec gives an unknown tool, naming only what the
/// client sent.
fn unknown_tool(name: &str) -> McpError {
    let shown = spear_common::text::prefix(name, 128);
    McpError::invalid_params(format!("Unknown tool: {shown}"), None)
}

impl ServerHandler for VirtualServer {
    fn get_info(&self) -> ServerConfig {
        let spec = self.tools.spec();
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
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

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let span = info_span!("northbound_call", virtual_server = %self.name(), tool = %spear_common::text::prefix(&request.name, 64));
        let arguments = request
            .arguments
            .map(|a| serde_json::Value::Object(a).to_string())
            .unwrap_or_default();
        self.call(&request.name, arguments)
            .instrument(span)
            .await
            .map(Into::into)
    }
}
