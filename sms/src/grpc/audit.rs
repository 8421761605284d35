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
    ResolveAuditRequest, ResolveAuditResponse, ShipAuditRequest, ShipAuditResponse, TrustEvent,
    UsageRequest, UsageResponse, VerifyAuditRequest, VerifyAuditResponse, WatchTrustRequest,
};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};

use crate::audit::{is_sms_chain, AdminAudit, AuditError, AuditStore};
use crate::events::TrustEvents;

pub struct AuditService {
    store: Arc<AuditStore>,
    events: TrustEvents,
    access: Access,
    /// The chain heads nodes report in their heartbeats.
    heads: Arc<crate::audit::heads::Heads>,
    /// Where resolving a dispute is recorded.
    audit: AdminAudit,
}

impl AuditService {
    pub fn new(store: Arc<AuditStore>, events: TrustEvents, access: Access) -> Self {
        Self {
            store,
            events,
            access,
            heads: Arc::default(),
            audit: AdminAudit::default(),
        }
    }

    /// Records admins' resolutions in SMS's own chain.
    pub fn audited(mut self, audit: AdminAudit) -> Self {
        self.audit = audit;
        self
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
        let mut answer = QueryAuditResponse {
            left_out,
            ..Default::default()
        };
        for one in found {
            answer.nodes.push(one.node);
            answer.records.push(one.line);
            answer.copies.push(one.copy);
            answer.sha256.push(one.sha256);
        }
        Ok(Response::new(answer))
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

    /// Ends a dispute over one seq; recorded in SMS's own chain as
    /// `resolve_audit <node> <seq> <kept sha256>`.
    async fn resolve_audit(
        &self,
        request: Request<ResolveAuditRequest>,
    ) -> Result<Response<ResolveAuditResponse>, Status> {
        let caller = self.access.admin(&request, "resolve_audit")?;
        let ask = request.into_inner();
        let result = self
            .store
            .resolve(&ask.node_id, ask.seq, &ask.keep_sha256)
            .await
            .map_err(to_status);
        let target = format!("{} {} {}", ask.node_id, ask.seq, ask.keep_sha256);
        self.audit
            .record(&caller, "resolve_audit", &target, &result)
            .await;
        let resolved = result?;
        tracing::info!(node_id = %ask.node_id, seq = ask.seq, %caller, dropped = resolved.dropped, replaced = resolved.replaced, "audit dispute resolved");
        Ok(Response::new(ResolveAuditResponse {
            dropped: resolved.dropped,
            replaced: resolved.replaced,
        }))
    }
}

fn to_status(error: AuditError) -> Status {
    match error {
        AuditError::Unavailable(_) => Status::unavailable(error.to_string()),
        AuditError::OtherNode { .. } => Status::permission_denied(error.to_string()),
        AuditError::NotDisputed { .. } | AuditError::NoSuchCopy { .. } => {
            Status::failed_precondition(error.to_string())
        }
        _ => Status::invalid_argument(error.to_string()),
    }
}
