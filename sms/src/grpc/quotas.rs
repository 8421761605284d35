//! `spear.v1.Quotas`: nodes take slices of fleet quotas. A thin face over
//! [`crate::quotas::QuotaBook`].

use std::sync::Arc;

use spear_identity::Access;
use spear_proto::v1::quotas_server::Quotas;
use spear_proto::v1::{TakeQuotaRequest, TakeQuotaResponse};
use tonic::{Request, Response, Status};
use tracing::debug;

use crate::quotas::{CounterError, QuotaBook, QuotaError};

pub struct QuotasService {
    book: Arc<QuotaBook>,
    access: Access,
}

impl QuotasService {
    pub fn new(book: Arc<QuotaBook>, access: Access) -> Self {
        Self { book, access }
    }
}

fn to_status(error: QuotaError) -> Status {
    match &error {
        QuotaError::NoMeter | QuotaError::NoId => Status::invalid_argument(error.to_string()),
        QuotaError::Counters(CounterError::Contended { .. }) => Status::aborted(error.to_string()),
        QuotaError::Counters(_) | QuotaError::Task { .. } => Status::unavailable(error.to_string()),
        QuotaError::Refused(_) => Status::resource_exhausted(error.to_string()),
    }
}

#[tonic::async_trait]
impl Quotas for QuotasService {
    async fn take_quota(
        &self,
        request: Request<TakeQuotaRequest>,
    ) -> Result<Response<TakeQuotaResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "take_quota")?;
        let take = request.into_inner();
        let quota = take.key.as_ref().map(|k| k.id.clone()).unwrap_or_default();
        match self.book.take(&node_id, &take).await {
            Ok(taken) => Ok(Response::new(taken)),
            Err(QuotaError::Refused(refusal)) => {
                // Counted per reason on /metrics; the node's tool result
                // carries the sentence.
                debug!(%node_id, %quota, %refusal, "a quota take was refused");
                Err(to_status(QuotaError::Refused(refusal)))
            }
            Err(error) => {
                // Each call of a node asks again while this lasts: one line
                // per call would flood the log during an etcd outage; the
                // nodes count these refusals
                // (spearlet_quota_refusals_total{reason="unreachable"}).
                debug!(%node_id, %quota, %error, "a quota could not be counted");
                Err(to_status(error))
            }
        }
    }
}
