//! `spear.v1.Audit`: nodes ship their records; admins query and verify.
//! A thin face over [`crate::audit::AuditBook`].

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use spear_identity::Access;
use spear_proto::v1::audit_server::Audit;
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{
    AuditEvent, LastAuditRequest, LastAuditResponse, QueryAuditRequest, QueryAuditResponse,
    ShipAuditRequest, ShipAuditResponse, TrustEvent, UsageRequest, UsageResponse,
    VerifyAuditRequest, VerifyAuditResponse, WatchTrustRequest,
};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};

use crate::audit::{is_sms_chain, AuditError, AuditStore};
use crate::events::TrustEvents;

pub struct AuditService {
    store: Arc<AuditStore>,
    events: TrustEvents,
    access: Access,
    /// The chain heads nodes report in their heartbeats.
    heads: Arc<crate::audit::heads::Heads>,
}

impl AuditService {
    pub fn new(store: Arc<AuditStore>, events: TrustEvents, access: Access) -> Self {
        Self {
            store,
            events,
            access,
            heads: Arc::default(),
        }
    }

    /// Names tails the nodes reported in `heads` and SMS never received.
    pub fn with_heads(mut self, heads: Arc<crate::audit::heads::Heads>) -> Self {
        self.heads = heads;
        self
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

    /// Where `node_id`'s chain stands at SMS; only that node may ask.
    async fn last_audit(
        &self,
        request: Request<LastAuditRequest>,
    ) -> Result<Response<LastAuditResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "last_audit")?;
        let last = self.store.last_of(&node_id).await.map_err(to_status)?;
        let (seq, hash) = last.map_or((0, String::new()), |line| {
            let record = serde_json::from_str::<spear_proto::audit::Record>(&line.json);
            (line.seq, record.map(|r| r.hash).unwrap_or_default())
        });
        Ok(Response::new(LastAuditResponse { seq, hash }))
    }

    async fn ship_audit(
        &self,
        request: Request<ShipAuditRequest>,
    ) -> Result<Response<ShipAuditResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "ship_audit")?;
        if is_sms_chain(&node_id) {
            return Err(Status::permission_denied(format!(
                "'{node_id}' names one of SMS's own audit chains; a node cannot ship records under it"
            )));
        }
        let shipment = request.into_inner();
        let shipped = self
            .store
            .ship(&node_id, shipment.records)
            .await
            .map_err(to_status)?;
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
            conflicts: shipped.conflicts,
        }))
    }

    async fn query_audit(
        &self,
        request: Request<QueryAuditRequest>,
    ) -> Result<Response<QueryAuditResponse>, Status> {
        self.access.admin(&request, "query_audit")?;
        let (found, left_out) = self
            .store
            .query(request.get_ref())
            .await
            .map_err(to_status)?;
        let (nodes, records) = found.into_iter().unzip();
        Ok(Response::new(QueryAuditResponse {
            records,
            nodes,
            left_out,
        }))
    }

    async fn usage(
        &self,
        request: Request<UsageRequest>,
    ) -> Result<Response<UsageResponse>, Status> {
        self.access.admin(&request, "usage")?;
        let totals = self
            .store
            .usage(request.get_ref())
            .await
            .map_err(to_status)?;
        Ok(Response::new(totals))
    }

    async fn verify_audit(
        &self,
        request: Request<VerifyAuditRequest>,
    ) -> Result<Response<VerifyAuditResponse>, Status> {
        self.access.admin(&request, "verify_audit")?;
        let mut chains = self.store.verify().await.map_err(to_status)?;
        for chain in &mut chains {
            if let Some(missing) = self.heads.missing(&chain.node_id, chain.last_seq) {
                chain.problem = match chain.problem.is_empty() {
                    true => missing,
                    false => format!("{}; {missing}", chain.problem),
                };
            }
        }
        Ok(Response::new(VerifyAuditResponse { chains }))
    }
}

fn to_status(error: AuditError) -> Status {
    match error {
        AuditError::Unavailable(_) => Status::unavailable(error.to_string()),
        _ => Status::invalid_argument(error.to_string()),
    }
}
