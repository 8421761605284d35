use std::sync::atomic::Ordering;
use std::sync::Arc;

use spear_identity::Access;
use spear_proto::v1::status_server::Status as StatusApi;
use spear_proto::v1::{StatusRequest, StatusResponse};
use tonic::{Request, Response, Status};

use crate::files::FileProblems;
use crate::nodes::NodeTable;
use crate::watch::Hub;

/// `spear.v1.Status`: what `sms status` shows.
pub struct StatusService {
    hub: Arc<Hub>,
    nodes: Arc<NodeTable>,
    problems: Arc<FileProblems>,
    /// Status is for admins.
    access: Access,
    insecure: bool,
}

impl StatusService {
    pub fn new(
        hub: Arc<Hub>,
        nodes: Arc<NodeTable>,
        problems: Arc<FileProblems>,
        access: Access,
    ) -> Self {
        Self {
            hub,
            nodes,
            problems,
            access,
            insecure: false,
        }
    }

    /// Says in every status that SMS serves plaintext beyond loopback.
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// The status as of now.
    pub fn snapshot(&self) -> StatusResponse {
        let (epoch, revision) = self.hub.position();
        StatusResponse {
            epoch,
            revision,
            server_count: self.hub.server_count() as u32,
            file_problems: self.problems.to_proto(),
            nodes: self.nodes.status(epoch, revision),
            watch_streams: self.hub.stats.streams.load(Ordering::Relaxed) as u32,
            store: self.hub.store().kind().to_string(),
            insecure: self.insecure,
        }
    }
}

#[tonic::async_trait]
impl StatusApi for StatusService {
    async fn get_status(
        &self,
        request: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        self.access.admin(&request, "get_status")?;
        Ok(Response::new(self.snapshot()))
    }
}
