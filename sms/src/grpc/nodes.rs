use std::sync::Arc;

use spear_identity::Access;
use spear_proto::v1::nodes_server::Nodes;
use spear_proto::v1::{HeartbeatRequest, HeartbeatResponse};
use tonic::{Request, Response, Status};

use tracing::warn;

use crate::nodes::{NodeError, NodeTable, SharedNodes, NODE_TTL};
use crate::watch::Hub;

/// A slow etcd must not hold heartbeats (the node's own SMS already has it).
const PUBLISH_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// `spear.v1.Nodes`: node registration and heartbeats.
pub struct NodesService {
    /// Where the nodes' audit chains stand, as they report it.
    heads: Arc<crate::audit::heads::Heads>,
    nodes: Arc<NodeTable>,
    shared: Option<Arc<SharedNodes>>,
    /// Times each change's way to the nodes.
    hub: Arc<Hub>,
    access: Access,
}

impl NodesService {
    /// `shared` publishes invocable nodes to the other SMS replicas (etcd).
    pub fn new(
        nodes: Arc<NodeTable>,
        shared: Option<Arc<SharedNodes>>,
        hub: Arc<Hub>,
        access: Access,
    ) -> Self {
        Self {
            heads: Arc::default(),
            nodes,
            shared,
            hub,
            access,
        }
    }

    /// Notes each node's reported audit chain head in `heads`.
    pub fn with_heads(mut self, heads: Arc<crate::audit::heads::Heads>) -> Self {
        self.heads = heads;
        self
    }
}

#[tonic::async_trait]
impl Nodes for NodesService {
    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "heartbeat")?;
        let report = request.into_inner();
        self.heads.note(&node_id, report.audit_head_seq);
        let published = report.clone();
        let before = self.nodes.applied(&node_id);
        let now = (report.applied_epoch, report.applied_revision);
        self.nodes.heartbeat(report).map_err(|e| match e {
            NodeError::TooFrequent(_) | NodeError::TooMany => {
                Status::resource_exhausted(e.to_string())
            }
            NodeError::EmptyId | NodeError::BadId(_) => Status::invalid_argument(e.to_string()),
        })?;
        // Heartbeats follow an applied change within 50 ms: the time since
        // SMS applied it is the change's way to this node.
        if let Some((epoch, revision)) = before {
            if epoch == now.0 && epoch == self.hub.position().0 {
                self.hub.node_caught_up(revision, now.1);
            }
        }
        if let Some(shared) = &self.shared {
            // Other replicas route to this node only while this succeeds;
            // the node's own SMS keeps serving it either way.
            match tokio::time::timeout(PUBLISH_WITHIN, shared.publish(&published)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    warn!(node_id = %published.node_id, %error, "cannot publish the node to the other SMS replicas")
                }
                Err(_) => {
                    warn!(node_id = %published.node_id, "etcd did not take the node's record within {PUBLISH_WITHIN:?}")
                }
            }
        }
        Ok(Response::new(HeartbeatResponse {
            ttl_ms: NODE_TTL.as_millis() as u32,
        }))
    }
}
