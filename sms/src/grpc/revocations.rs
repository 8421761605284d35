use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use spear_identity::Access;
use spear_proto::v1::revocations_server::Revocations as RevocationsApi;
use spear_proto::v1::{ListRevocationsRequest, RevocationList, RevokeRequest, RevokeResponse};
use tokio_stream::wrappers::WatchStream;
use tonic::{Request, Response, Status};
use tracing::info;

use crate::audit::AdminAudit;
use crate::revocations::{RevocationError, Revocations};

/// `spear.v1.Revocations`: admins revoke certificates; nodes follow the
/// list so their Invocation ports refuse what SMS refuses.
pub struct RevocationsService {
    revocations: Arc<Revocations>,
    access: Access,
    audit: AdminAudit,
}

impl RevocationsService {
    pub fn new(revocations: Arc<Revocations>, access: Access) -> Self {
        Self {
            revocations,
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

/// A reason is for people; a long one is not a reason.
const MAX_REASON: usize = 512;

fn to_status(error: RevocationError) -> Status {
    match error {
        RevocationError::BadTarget(_) => Status::invalid_argument(error.to_string()),
        RevocationError::Unavailable(_) => Status::unavailable(error.to_string()),
    }
}

type ListStream = Pin<Box<dyn Stream<Item = Result<RevocationList, Status>> + Send>>;

#[tonic::async_trait]
impl RevocationsApi for RevocationsService {
    async fn revoke(
        &self,
        request: Request<RevokeRequest>,
    ) -> Result<Response<RevokeResponse>, Status> {
        let caller = self.access.admin(&request, "revoke")?;
        let Some(mut revocation) = request.into_inner().revocation else {
            return Err(to_status(RevocationError::BadTarget(String::new())));
        };
        spear_common::text::truncate(&mut revocation.reason, MAX_REASON);
        let target = crate::revocations::target(&revocation).map_err(to_status)?;
        let result = self.revocations.revoke(revocation).await.map_err(to_status);
        self.audit
            .record(&caller, "revoke", &target.to_string(), &result)
            .await;
        let added = result?;
        info!(%caller, %target, added, "certificate revoked");
        Ok(Response::new(RevokeResponse { added }))
    }

    async fn list(
        &self,
        request: Request<ListRevocationsRequest>,
    ) -> Result<Response<RevocationList>, Status> {
        self.access.reader(&request, "list revocations")?;
        let revocations = self.revocations.subscribe().borrow().as_ref().clone();
        Ok(Response::new(RevocationList { revocations }))
    }

    type WatchStream = ListStream;

    async fn watch(
        &self,
        request: Request<ListRevocationsRequest>,
    ) -> Result<Response<ListStream>, Status> {
        self.access.reader(&request, "watch revocations")?;
        let revoked = self.access.until_revoked(&request);
        let stream = WatchStream::new(self.revocations.subscribe())
            .map(|list| {
                Ok(RevocationList {
                    revocations: list.as_ref().clone(),
                })
            })
            .take_until(revoked);
        Ok(Response::new(Box::pin(stream)))
    }
}
