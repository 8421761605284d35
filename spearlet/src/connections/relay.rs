//! [`Connections::relay`]: a request of a northbound MCP client passed to
//! one server over the node's session with it, within the server's
//! concurrency limit and call timeout (see `mcp::relay`). What comes back
//! is the server's own answer; the caller redacts it for its type.

use rmcp::model::{ClientRequest, ServerResult};

use super::slot::Slot;
use super::Connections;
use crate::mcp::McpError;

impl Connections {
    /// Sends `request` to `server_id` (connecting on first use).
    pub async fn relay(
        &self,
        server_id: &str,
        request: ClientRequest,
    ) -> Result<ServerResult, McpError> {
        self.slot(server_id)?.relay(request).await
    }
}

impl Slot {
    async fn relay(&self, request: ClientRequest) -> Result<ServerResult, McpError> {
        let _permit = self.permit().await?;
        let client = self.connected().await?;
        client
            .relay(request, self.timeouts.call)
            .await
            .map_err(|error| self.clean(error))
    }
}
