//! `spear.v1.Audit`: nodes ship their records; admins query and verify.
//! A thin face over [`crate::audit::AuditBook`].

use std::sync::Arc;

use spear_identity::Access;
use spear_proto::v1::audit_server::Audit;
use spear_proto::v1::{
    QueryAuditRequest, QueryAuditResponse, ShipAuditRequest, ShipAuditResponse,
    VerifyAuditRequest, VerifyAuditResponse,
};
use tonic::{Request, Response, Status};

use crate::audit::AuditBook;

pub struct AuditService {
    book: Arc<AuditBook>,
    access: Access,
}

impl AuditService {
    pub fn new(book: Arc<AuditBook>, access: Access) -> Self {
        Self { book, access }
    }
}

#[tonic::async_trait]
impl Audit for AuditService {
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
