use std::sync::Arc;

use spear_proto::v1::nodes_server::Nodes;
use spear_proto::v1::{HeartbeatRequest, HeartbeatResponse};
use tonic::{Request, Response, Status};

use crate::nodes::{NodeTable, NODE_TTL};

/// `spear.v1.Nodes`: node registration and heartbeats.
pub struct NodesService {
    nodes: Arc<NodeTable>,
}

impl NodesService {
    pub fn new(nodes: Arc<NodeTable>) -> Self {
        Self { nodes }
    }
}

#[tonic::async_trait]
impl Nodes for NodesService {
    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        self.nodes
            .heartbeat(request.into_inner())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(Response::new(HeartbeatResponse {
            ttl_ms: NODE_TTL.as_millis() as u32,
        }))
    }
}
