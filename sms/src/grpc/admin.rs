use std::sync::Arc;

use spear_identity::Access;
use spear_proto::v1::admin_server::Admin as AdminApi;
use spear_proto::v1::{
    DeleteServerRequest, DeleteServerResponse, UpsertServerRequest, UpsertServerResponse,
};
use tonic::{Request, Response, Status};
use tracing::info;

use crate::admin::{Admin, AdminError};
use crate::audit::AdminAudit;
use crate::store::StoreError;

/// `spear.v1.Admin`: authenticated registry writes.
pub struct AdminService {
    admin: Arc<Admin>,
    access: Access,
    audit: AdminAudit,
}

impl AdminService {
    pub fn new(admin: Arc<Admin>, access: Access) -> Self {
        Self {
            admin,
            access,
            audit: AdminAudit::default(),
        }
    }

    /// Records this service's admin writes in the audit trail.
    pub fn audited(mut self, audit: AdminAudit) -> Self {
        self.audit = audit;
        self
    }
}

/// Admin requests larger than this are refused before parsing.
const MAX_SPEC_BYTES: usize = 1024 * 1024;

fn to_status(error: AdminError) -> Status {
    match &error {
        AdminError::Invalid(_) => Status::invalid_argument(error.to_string()),
        AdminError::OwnedByFile { .. } => Status::failed_precondition(error.to_string()),
        AdminError::NotFound(_) => Status::not_found(error.to_string()),
        AdminError::Store(StoreError::Conflict { .. }) => Status::aborted(error.to_string()),
        AdminError::Store(_) => Status::unavailable(error.to_string()),
    }
}

#[tonic::async_trait]
impl AdminApi for AdminService {
    async fn upsert_server(
        &self,
        request: Request<UpsertServerRequest>,
    ) -> Result<Response<UpsertServerResponse>, Status> {
        let caller = self.access.admin(&request, "upsert_server")?;
        let spec_json = request.into_inner().spec_json;
        if spec_json.len() > MAX_SPEC_BYTES {
            return Err(Status::invalid_argument(format!(
                "server spec is {} bytes; the limit is {MAX_SPEC_BYTES}",
                spec_json.len()
            )));
        }
        let result = self.admin.upsert(&spec_json).await.map_err(to_status);
        let target = serde_json::from_str::<serde_json::Value>(&spec_json)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        self.audit
            .record(&caller, "upsert_server", &target, &result)
            .await;
        let revision = result?;
        info!(revision, %caller, "admin upsert applied");
        Ok(Response::new(UpsertServerResponse { revision }))
    }

    async fn delete_server(
        &self,
        request: Request<DeleteServerRequest>,
    ) -> Result<Response<DeleteServerResponse>, Status> {
        let caller = self.access.admin(&request, "delete_server")?;
        let id = request.into_inner().id;
        let result = self.admin.delete(&id).await.map_err(to_status);
        self.audit
            .record(&caller, "delete_server", &id, &result)
            .await;
        let revision = result?;
        info!(server_id = %id, revision, %caller, "admin delete applied");
        Ok(Response::new(DeleteServerResponse { revision }))
    }
}
