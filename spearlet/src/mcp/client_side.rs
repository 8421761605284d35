//! The node's side of one MCP session: what it declares, and what it
//! answers and takes from the server. Its own file so the client's
//! connecting and calling are apart from the handler rmcp calls into.

use std::sync::Arc;

#[allow(deprecated)]
use rmcp::model::{
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorData,
    FormElicitationCapability, LoggingMessageNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::watch;

use super::elicitation::ElicitationPolicy;
use super::server_log::ServerLog;

/// The node's side of one session: answers what the server asks (pings,
/// elicitation) and takes what it tells (tool list changes, log lines).
#[derive(Clone)]
pub(super) struct ClientSide {
    pub(super) tools_changed: Arc<watch::Sender<u64>>,
    pub(super) elicitation: ElicitationPolicy,
    pub(super) log: Arc<ServerLog>,
}

impl ClientHandler for ClientSide {
    /// For an `initialize` handshake this names the newest protocol version
    /// that has one (2025-11-25); 2026-07-28 servers are reached through
    /// `server/discover` first (see `lifecycle`). Form elicitation is
    /// always declared: declining is an answer the protocol has, and a
    /// server that can do without the input then takes its fallback,
    /// where one told "no capability" would refuse the call outright.
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config.client_info.name = "spearlet".into();
        config.client_info.version = env!("CARGO_PKG_VERSION").into();
        config.capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        config
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.elicitation.answer(&self.log, request).await)
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.tools_changed.send_modify(|n| *n += 1);
        std::future::ready(())
    }

    #[allow(deprecated)] // in 2025-11-25, which servers speak (see server_log)
    fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.log.message(&params);
        std::future::ready(())
    }
}
