//! [`Router::relay`]: what a northbound client asks of a server besides
//! its tools (resources, prompts, completion, a log level), passed to the
//! server over the node's session with it. Tool calls never come this
//! way: they take [`Router::run`], with the policy, approvals and audit.

use rmcp::model::{ClientRequest, ServerResult};

use super::Router;
use crate::mcp::McpError;

impl Router {
    /// Sends `request` to `server_id`; the answer is the server's own, to
    /// be redacted ([`Router::redact`]) before it leaves the node.
    pub async fn relay(
        &self,
        server_id: &str,
        request: ClientRequest,
    ) -> Result<ServerResult, McpError> {
        self.connections.relay(server_id, request).await
    }
}

impl Router {
    /// Told of every change of the node's registry: a virtual server's
    /// clients are told of what it changes in their list.
    pub fn registry_changes(
        &self,
    ) -> tokio::sync::watch::Receiver<crate::registry::RegistryChange> {
        self.registry.subscribe()
    }
}
