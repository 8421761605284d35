//! The node's side of one MCP session: what it declares, and what it
//! answers and takes from the server. Its own file so the client's
//! connecting and calling are apart from the handler rmcp calls into.

use std::sync::Arc;

#[allow(deprecated)]
use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationCapability, ErrorData, FormElicitationCapability,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion,
    SamplingCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::watch;

use super::elicitation::ElicitationPolicy;
use super::server_log::ServerLog;
use super::way_back::InFlight;

/// The node's side of one session: answers what the server asks (pings,
/// elicitation, sampling) and takes what it tells (tool list changes, log
/// lines, progress); what belongs to a northbound client's call goes back
/// to it (`way_back`).
#[derive(Clone)]
pub(super) struct ClientSide {
    pub(super) tools_changed: Arc<watch::Sender<u64>>,
    pub(super) elicitation: ElicitationPolicy,
    pub(super) log: Arc<ServerLog>,
    pub(super) in_flight: Arc<InFlight>,
    /// Whether sampling is declared (`SessionOptions::relay_sampling`).
    pub(super) sampling: bool,
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
        if self.sampling {
            config.capabilities.sampling = Some(SamplingCapability::default());
        }
        config
    }

    /// The northbound client of the only call in flight answers, if it
    /// can; otherwise the server's elicitation policy does.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let Some(way_back) = self.in_flight.only() {
            if let Some(answer) = way_back.elicit(request.clone()).await {
                return Ok(answer);
            }
        }
        Ok(self.elicitation.answer(&self.log, request).await)
    }

    /// Only a northbound client has a model to lend: the one of the only
    /// call in flight.
    #[allow(deprecated)] // sampling: a 2025-11-25 feature
    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match self.in_flight.only() {
            Some(way_back) => way_back.sample(request).await,
            None => None,
        }
        .unwrap_or_else(|| {
            Err(ErrorData::invalid_request(
                "sampling is answered only during one call of an MCP client that declared it",
                None,
            ))
        })
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let way_back = self.in_flight.by_token(&params.progress_token);
        async move {
            if let Some(way_back) = way_back {
                way_back.progress(params).await;
            }
        }
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
        let way_back = self.in_flight.only();
        async move {
            if let Some(way_back) = way_back {
                way_back.log(params).await;
            }
        }
    }
}
