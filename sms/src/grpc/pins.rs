//! `spear.v1.Pins`: nodes report what their servers list; admins list,
//! diff, approve and reject. A thin face over [`crate::pins::PinBook`]
//! and the registry writer (pins live in server records).

use std::sync::Arc;

use spear_identity::Access;
use spear_proto::pins::PinMode;
use spear_proto::v1::pins_server::Pins;
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{
    ApprovePinsRequest, ApprovePinsResponse, DiffPinsRequest, DiffPinsResponse, ListPinsRequest,
    ListPinsResponse, PinDrift, RejectPinsRequest, RejectPinsResponse, ReportToolsRequest,
    ReportToolsResponse, ServerRecord, ToolPins,
};
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use crate::audit::AdminAudit;
use crate::events::TrustEvents;
use crate::pins::{PinBook, PinError};
use crate::store::Change;
use crate::watch::Hub;
use crate::writer::{RegistryWriter, WriteError};

pub struct PinsService {
    book: Arc<PinBook>,
    events: TrustEvents,
    audit: AdminAudit,
    hub: Arc<Hub>,
    writer: Arc<RegistryWriter>,
    access: Access,
}

impl PinsService {
    pub fn new(
        book: Arc<PinBook>,
        events: TrustEvents,
        hub: Arc<Hub>,
        writer: Arc<RegistryWriter>,
        access: Access,
    ) -> Self {
        Self {
            book,
            events,
            audit: AdminAudit::default(),
            hub,
            writer,
            access,
        }
    }

    /// Records this service's admin writes in the audit trail.
    pub fn audited(mut self, audit: AdminAudit) -> Self {
        self.audit = audit;
        self
    }

    /// Makes what nodes see the pin, as `ask` says; the pins written and
    /// the revision.
    async fn approve(&self, ask: &ApprovePinsRequest) -> Result<(Option<ToolPins>, u64), Status> {
        let record = self.record(&ask.server_id)?;
        let pins = self
            .book
            .approval(&record, optional(&ask.tool), optional(&ask.node_id))
            .map_err(to_status)?;
        self.write_pins(&ask.server_id, pins, false).await
    }

    fn record(&self, server: &str) -> Result<ServerRecord, Status> {
        self.hub
            .with_servers(|_, _, view| view.get(server).cloned())
            .ok_or_else(|| to_status(PinError::UnknownServer(server.to_string())))
    }

    /// Writes `pins` into `server`'s record; when `only_if_unpinned`, only
    /// if it has none yet (a first sight racing another). Answers the pins
    /// the record holds afterwards, and the revision.
    async fn write_pins(
        &self,
        server: &str,
        pins: ToolPins,
        only_if_unpinned: bool,
    ) -> Result<(Option<ToolPins>, u64), Status> {
        let result = self
            .writer
            .apply(|view| {
                let record = view
                    .get(server)
                    .ok_or_else(|| PinError::UnknownServer(server.to_string()))?;
                if (only_if_unpinned && record.pins.is_some())
                    || record.pins.as_ref() == Some(&pins)
                {
                    return Ok(Change::default());
                }
                Ok(Change {
                    upserts: vec![ServerRecord {
                        pins: Some(pins.clone()),
                        ..record.clone()
                    }],
                    deletes: vec![],
                })
            })
            .await;
        let revision = match result {
            Ok(revision) => revision,
            Err(WriteError::Rejected(error)) => return Err(to_status(error)),
            Err(WriteError::Store(error)) => return Err(Status::unavailable(error.to_string())),
        };
        Ok((self.record(server)?.pins, revision))
    }
}

fn to_status(error: PinError) -> Status {
    match &error {
        PinError::UnknownServer(_)
        | PinError::NothingSeen(_)
        | PinError::ToolNotSeen { .. }
        | PinError::NodeNotSeen { .. } => Status::not_found(error.to_string()),
        PinError::Disagree { .. } => Status::failed_precondition(error.to_string()),
        _ => Status::invalid_argument(error.to_string()),
    }
}

fn optional(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

#[tonic::async_trait]
impl Pins for PinsService {
    async fn report_tools(
        &self,
        request: Request<ReportToolsRequest>,
    ) -> Result<Response<ReportToolsResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "report_tools")?;
        let report = request.into_inner();
        let record = self.record(&report.server_id)?;
        self.book
            .observe(&node_id, &report.server_id, &report.tools)
            .map_err(to_status)?;
        let mode = PinMode::of(
            &record
                .spec
                .as_ref()
                .map(|s| s.pin.clone())
                .unwrap_or_default(),
        );
        let pins = match (mode, record.pins) {
            (PinMode::FirstSeen, None) => {
                let first = PinBook::first_pins(&report.tools);
                let (pins, revision) = self.write_pins(&report.server_id, first, true).await?;
                info!(server_id = %report.server_id, node_id = %node_id, revision, "tools pinned as first seen");
                pins
            }
            (_, pins) => pins,
        };
        if let Some(pins) = &pins {
            let drifted: Vec<String> = report
                .tools
                .iter()
                .filter(|t| pins.tools.get(&t.name) != Some(&t.digest))
                .map(|t| t.name.clone())
                .collect();
            if !drifted.is_empty() && mode != PinMode::Off {
                warn!(server_id = %report.server_id, node_id = %node_id, drifted = drifted.len(), "a node sees tools that are not as pinned; see `sms pins diff`");
                self.events.publish(Event::Drift(PinDrift {
                    server_id: report.server_id.clone(),
                    node_id: node_id.clone(),
                    tools: drifted,
                }));
            }
        }
        Ok(Response::new(ReportToolsResponse { pins }))
    }

    async fn list_pins(
        &self,
        request: Request<ListPinsRequest>,
    ) -> Result<Response<ListPinsResponse>, Status> {
        self.access.admin(&request, "list_pins")?;
        let records: Vec<ServerRecord> = self
            .hub
            .with_servers(|_, _, view| view.iter().cloned().collect());
        let servers = records.iter().map(|r| self.book.state(r)).collect();
        Ok(Response::new(ListPinsResponse { servers }))
    }

    async fn diff_pins(
        &self,
        request: Request<DiffPinsRequest>,
    ) -> Result<Response<DiffPinsResponse>, Status> {
        self.access.admin(&request, "diff_pins")?;
        let ask = request.into_inner();
        let record = self.record(&ask.server_id)?;
        let text = self
            .book
            .diff(&record, optional(&ask.tool))
            .map_err(to_status)?;
        Ok(Response::new(DiffPinsResponse { text }))
    }

    async fn approve_pins(
        &self,
        request: Request<ApprovePinsRequest>,
    ) -> Result<Response<ApprovePinsResponse>, Status> {
        let caller = self.access.admin(&request, "approve_pins")?;
        let ask = request.into_inner();
        let result = self.approve(&ask).await;
        let target = format!("{} {}", ask.server_id, ask.tool);
        self.audit
            .record(&caller, "approve_pins", target.trim_end(), &result)
            .await;
        let (written, revision) = result?;
        let pinned = written.map_or(0, |p| p.tools.len() as u32);
        info!(server_id = %ask.server_id, tool = %ask.tool, %caller, revision, "tool pins approved");
        Ok(Response::new(ApprovePinsResponse { revision, pinned }))
    }

    async fn reject_pins(
        &self,
        request: Request<RejectPinsRequest>,
    ) -> Result<Response<RejectPinsResponse>, Status> {
        let caller = self.access.admin(&request, "reject_pins")?;
        let ask = request.into_inner();
        let result = self.record(&ask.server_id);
        let target = format!("{} {}", ask.server_id, ask.tool);
        self.audit
            .record(&caller, "reject_pins", target.trim_end(), &result)
            .await;
        let rejected = self.book.reject(&result?, optional(&ask.tool)) as u32;
        info!(server_id = %ask.server_id, tool = %ask.tool, %caller, rejected, "tool definitions rejected; the pins stand");
        Ok(Response::new(RejectPinsResponse { rejected }))
    }
}
