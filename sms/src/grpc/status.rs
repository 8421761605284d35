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
        self.snapshot_for(None)
    }

    /// The status as of now; with `node_id`, only that node, with its
    /// servers' states.
    pub fn snapshot_for(&self, node_id: Option<&str>) -> StatusResponse {
        let (epoch, revision) = self.hub.position();
        let nodes = match node_id {
            Some(id) => self
                .nodes
                .node_status(id, epoch, revision)
                .into_iter()
                .collect(),
            None => self.nodes.status(epoch, revision),
        };
        StatusResponse {
            epoch,
            revision,
            server_count: self.hub.server_count() as u32,
            file_problems: self.problems.to_proto(),
            nodes,
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
        let node_id = &request.get_ref().node_id;
        Ok(Response::new(self.snapshot_for(
            (!node_id.is_empty()).then_some(node_id.as_str()),
        )))
    }
}
