//! `spear.v1.Audit`: nodes ship their records; admins query and verify.
//! A thin face over [`crate::audit::AuditBook`].

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use spear_identity::Access;
use spear_proto::v1::audit_server::Audit;
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{
    AuditEvent, QueryAuditRequest, QueryAuditResponse, ShipAuditRequest, ShipAuditResponse,
    TrustEvent, VerifyAuditRequest, VerifyAuditResponse, WatchTrustRequest,
};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};

use crate::audit::{AuditBook, SMS_CHAIN};
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
        if node_id == SMS_CHAIN {
            return Err(Status::permission_denied(format!(
                "'{SMS_CHAIN}' is SMS's own audit chain; a node cannot ship records under it"
            )));
        }
        let shipment = request.into_inner();
        let shipped = self
            .book
            .ship(&node_id, shipment.records)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        for record in shipped.new {
            crate::audit::export(&node_id, &record);
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
