//! A `tools/call` through a virtual server: resolved against the listing
//! a `tools/list` would give, checked again by the router under the
//! virtual server's policy, run through the router's call path (approvals,
//! quotas, audit, the server's credentials redacted) with the client as
//! its way back ([`ClientWay`]). A 2026-07-28 client whose call the
//! server asks questions of gets the server's `input_required` with a
//! sealed `requestState` ([`Sealer`]); its retry brings the answers, and a
//! state not sealed for that very call is refused before anything runs.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse, InputResponses};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use super::handler::VirtualServer;
use super::result::client_result;
use super::way_back::ClientWay;
use crate::mcp::{WayBack, WAY_BACK};

/// What a retry brings the server: the client's answers, the server's state.
type Resume = Option<(Option<InputResponses>, Option<String>)>;

impl VirtualServer {
    /// Runs the tool `request` names, or refuses it as unknown.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        // What a sealed state is bound to: the method and the name.
        let bound = format!("tools/call {name}");
        let arguments = request
            .arguments
            .map(|a| serde_json::Value::Object(a).to_string())
            .unwrap_or_default();
        let listing = self.tools.list(&self.router).await;
        let target = listing.resolve(&name).ok_or_else(|| unknown_tool(&name))?;
        let resume = self.resume(
            request.input_responses,
            request.request_state.as_deref(),
            &bound,
            &arguments,
        )?;
        let client =
            Arc::new(ClientWay::of(context, &self.router, &target.server).resuming(resume));
        let allowed = self
            .tools
            .allow(&self.router, target)
            .map_err(|_| unknown_tool(&name))?;
        let run = self.router.run(self.tools.task(), allowed, &arguments);
        let way_back: Arc<dyn WayBack> = Arc::clone(&client) as Arc<dyn WayBack>;
        let outcome = WAY_BACK.scope(way_back, run).await;
        if let Some(refusal) = client.refusal() {
            return Err(refusal);
        }
        if let Some(mut asked) = client.handed_back() {
            let upstream = asked.request_state.take();
            asked.request_state = Some(self.sealer.seal(&bound, &arguments, upstream));
            return Ok(CallToolResponse::InputRequired(asked));
        }
        Ok(client_result(&self.router, &outcome).into())
    }

    /// A retry's answers and the server's own state, its sealed state
    /// checked against the call.
    fn resume(
        &self,
        responses: Option<InputResponses>,
        state: Option<&str>,
        bound: &str,
        arguments: &str,
    ) -> Result<Resume, McpError> {
        let upstream = match state {
            Some(state) => self
                .sealer
                .open(state, bound, arguments)
                .map_err(|refused| McpError::invalid_params(refused.to_string(), None))?,
            None => None,
        };
        if responses.is_none() && state.is_none() {
            return Ok(None);
        }
        Ok(Some((responses, upstream)))
    }
}

/// What a call of a tool this virtual server does not offer gets, whether
/// it exists elsewhere, is denied or held, or was never anything: the
/// JSON-RPC error the MCP spec gives an unknown tool, naming only what the
/// client sent.
pub(super) fn unknown_tool(name: &str) -> McpError {
    let shown = spear_common::text::prefix(name, 128);
    McpError::invalid_params(format!("Unknown tool: {shown}"), None)
}
