use std::sync::Arc;

use spear_identity::{Access, Caller};
use spear_proto::refs::redact_literals;
use spear_proto::shared_registry::registry_server::Registry;
use spear_proto::v1::{ListServersRequest, ListServersResponse, WatchRequest};
use tonic::{Request, Response, Status};
use tracing::debug;

use crate::watch::{Hub, WatchStream};

/// `spear.v1.Registry`: list and watch, served from the hub, to nodes and
/// admins. Literal `env`/`headers` values reach nodes only.
pub struct RegistryService {
    hub: Arc<Hub>,
    access: Access,
}

impl RegistryService {
    pub fn new(hub: Arc<Hub>, access: Access) -> Self {
        Self { hub, access }
    }
}

#[tonic::async_trait]
impl Registry for RegistryService {
    async fn list_servers(
        &self,
        request: Request<ListServersRequest>,
    ) -> Result<Response<ListServersResponse>, Status> {
        let caller = self.access.reader(&request, "list_servers")?;
        self.hub.wait_loaded().await;
        let mut response = self
            .hub
            .with_servers(|epoch, revision, view| ListServersResponse {
                epoch,
                revision,
                servers: view.iter().cloned().collect(),
            });
        if !matches!(caller, Caller::Node(_)) {
            for spec in response.servers.iter_mut().filter_map(|r| r.spec.as_mut()) {
                redact_literals(spec);
            }
        }
        Ok(Response::new(response))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        // Only a node, as itself: the stream carries literal secrets, which
        // admins see redacted through list_servers instead.
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "watch")?;
        let request = request.into_inner();
        debug!(node_id = %request.node_id, epoch = request.epoch, revision = request.revision, "watch opened");
        Ok(Response::new(self.hub.watch(request)))
    }
}
