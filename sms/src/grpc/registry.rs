use std::sync::Arc;

use spear_proto::shared_registry::registry_server::Registry;
use spear_proto::v1::{ListServersRequest, ListServersResponse, WatchRequest};
use tonic::{Request, Response, Status};
use tracing::debug;

use crate::watch::{Hub, WatchStream};

/// `spear.v1.Registry`: list and watch, served from the hub.
pub struct RegistryService {
    hub: Arc<Hub>,
}

impl RegistryService {
    pub fn new(hub: Arc<Hub>) -> Self {
        Self { hub }
    }
}

#[tonic::async_trait]
impl Registry for RegistryService {
    async fn list_servers(
        &self,
        _request: Request<ListServersRequest>,
    ) -> Result<Response<ListServersResponse>, Status> {
        self.hub.wait_loaded().await;
        let response = self
            .hub
            .with_servers(|epoch, revision, view| ListServersResponse {
                epoch,
                revision,
                servers: view.iter().cloned().collect(),
            });
        Ok(Response::new(response))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let request = request.into_inner();
        debug!(node_id = %request.node_id, epoch = request.epoch, revision = request.revision, "watch opened");
        Ok(Response::new(self.hub.watch(request)))
    }
}
