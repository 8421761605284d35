//! [`McpClient::relay`]: one request of an MCP client of the node's
//! northbound endpoint passed on to the server as it is (a list of
//! resources or prompts, a read, a prompt, a completion, a subscription,
//! a log level). Tool calls do not come this way: they go through the
//! router's call path, with its policy, approvals and audit.

use std::time::Duration;

use rmcp::model::{ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;

use super::client::McpClient;
use super::error::McpError;

impl McpClient {
    /// Sends `request` and waits at most `timeout` for the server's
    /// answer. A JSON-RPC error of the server comes back as
    /// [`McpError::Rpc`], so the client can be given it as it was.
    pub async fn relay(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, McpError> {
        let options = PeerRequestOptions::with_timeout(timeout);
        let handle = self
            .peer()
            .send_cancellable_request(request, options)
            .await
            .map_err(|error| self.request_error(error))?;
        match handle.await_response().await {
            Ok(result) => Ok(result),
            Err(rmcp::ServiceError::McpError(error)) => Err(McpError::Rpc(error)),
            Err(rmcp::ServiceError::Timeout { .. }) => Err(McpError::Timeout {
                what: "a request relayed to the server",
                after: timeout,
            }),
            Err(error) => Err(self.request_error(error)),
        }
    }
}
