//! `spear.v1.Audit`: nodes ship their records; admins query and verify.
//! A thin face over [`crate::audit::AuditBook`].

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use spear_identity::Access;
use spear_proto::audit::Record;
use spear_proto::v1::audit_server::Audit;
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{
    AuditEvent, AuditLine, QueryAuditRequest, QueryAuditResponse, ShipAuditRequest, ShipAuditResponse,
    TrustEvent, VerifyAuditRequest, VerifyAuditResponse, WatchTrustRequest,
};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};

use crate::audit::AuditBook;
use crate::events::TrustEvents;

pub struct AuditService {
    book: Arc<AuditBook>,
    events: TrustEvents,
    access: Access,
}

impl AuditService {
    pub fn new(book: Arc<AuditBook>, events: TrustEvents, access: Access) -> Self {
        Self {
            book,
            events,
            access,
        }
    }
}

#[tonic::async_trait]
impl Audit for AuditService {
    type WatchTrustStream = BoxStream<'static, Result<TrustEvent, Status>>;

    async fn watch_trust(
        &self,
        request: Request<WatchTrustRequest>,
    ) -> Result<Response<Self::WatchTrustStream>, Status> {
        self.access.admin(&request, "watch_trust")?;
        let events = BroadcastStream::new(self.events.subscribe()).map(|event| {
            Ok(match event {
                Ok(event) => event,
                Err(BroadcastStreamRecvError::Lagged(missed)) => TrustEvent {
                    event: Some(Event::Lagged(missed)),
                },
            })
        });
        Ok(Response::new(events.boxed()))
    }

    async fn ship_audit(
        &self,
        request: Request<ShipAuditRequest>,
    ) -> Result<Response<ShipAuditResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "ship_audit")?;
        let shipment = request.into_inner();
        let shipped = self
            .book
            .ship(&node_id, shipment.records)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        for record in shipped.new {
            export(&node_id, &record);
            self.events.publish(Event::Audit(AuditEvent {
                node_id: node_id.clone(),
                record: Some(record),
            }));
        }
        Ok(Response::new(ShipAuditResponse {
            stored: shipped.stored,
            duplicates: shipped.duplicates,
        }))
    }

    async fn query_audit(
        &self,
        request: Request<QueryAuditRequest>,
    ) -> Result<Response<QueryAuditResponse>, Status> {
        self.access.admin(&request, "query_audit")?;
        let (found, left_out) = self.book.query(request.get_ref());
        let (nodes, records) = found.into_iter().unzip();
        Ok(Response::new(QueryAuditResponse {
            records,
            nodes,
            left_out,
        }))
    }

    async fn verify_audit(
        &self,
        request: Request<VerifyAuditRequest>,
    ) -> Result<Response<VerifyAuditResponse>, Status> {
        self.access.admin(&request, "verify_audit")?;
        Ok(Response::new(VerifyAuditResponse {
            chains: self.book.verify(),
        }))
    }
}

/// Sends `record` to the operator's log pipeline (when OTLP is set up).
fn export(node: &str, record: &AuditLine) {
    let parsed: Record = serde_json::from_str(&record.json).unwrap_or_default();
    let kind = serde_json::to_value(parsed.kind).unwrap_or_default();
    let labels = spear_common::audit_export::Labels {
        node,
        seq: record.seq,
        kind: kind.as_str().unwrap_or_default(),
        outcome: parsed.outcome.name(),
    };
    spear_common::audit_export::export(labels, &record.json);
}
