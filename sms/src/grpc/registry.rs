use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use parking_lot::Mutex;

use spear_identity::{Access, Caller};
use spear_proto::refs::redact_literals;
use spear_proto::shared_registry::registry_server::Registry;
use spear_proto::v1::{FollowRequest, ListServersRequest, ListServersResponse, WatchRequest};
use tonic::{Request, Response, Status, Streaming};
use tracing::debug;

use super::follow;
use super::reports::Reports;
use crate::watch::{Hub, WatchStream};

/// Watch streams one node identity may hold at once by default: one, and
/// room for a reconnect that overlaps the old stream's end. On plaintext
/// ports there are no identities and no bound.
pub const MAX_WATCHES_PER_NODE: usize = 4;

/// The largest watch request SMS takes. The service decodes messages up
/// to a node's report (a follow stream carries both), so the watch
/// request's own bound is checked here: a node id is at most 128 bytes.
const MAX_WATCH_REQUEST_BYTES: usize = 64 * 1024;

/// Refuses a watch request larger than [`MAX_WATCH_REQUEST_BYTES`], as the
/// service's decoding limit did before it carried reports.
fn bounded(watch: &WatchRequest) -> Result<(), Status> {
    let len = prost::Message::encoded_len(watch);
    if len > MAX_WATCH_REQUEST_BYTES {
        return Err(Status::out_of_range(format!(
            "the watch request is {len} bytes; the limit is {MAX_WATCH_REQUEST_BYTES}"
        )));
    }
    Ok(())
}

/// `spear.v1.Registry`: list, watch and follow, served from the hub, to
/// nodes and admins. Literal `env`/`headers` values reach nodes only.
pub struct RegistryService {
    hub: Arc<Hub>,
    /// Where the reports on follow streams land.
    reports: Arc<Reports>,
    access: Access,
    watches: Arc<Mutex<HashMap<String, usize>>>,
    max_per_node: usize,
}

/// One open watch of a node, counted until its stream is dropped.
struct WatchPermit {
    watches: Arc<Mutex<HashMap<String, usize>>>,
    node_id: String,
}

impl Drop for WatchPermit {
    fn drop(&mut self) {
        let mut watches = self.watches.lock();
        if let Some(n) = watches.get_mut(&self.node_id) {
            *n -= 1;
            if *n == 0 {
                watches.remove(&self.node_id);
            }
        }
    }
}

impl RegistryService {
    pub fn new(hub: Arc<Hub>, reports: Arc<Reports>, access: Access, max_per_node: usize) -> Self {
        Self {
            hub,
            reports,
            access,
            watches: Arc::default(),
            max_per_node,
        }
    }

    /// A permit for one more watch by `node_id`, if it has room (none
    /// needed on a plaintext port, where there are no identities).
    fn permit_if_secure(&self, node_id: &str) -> Result<Option<WatchPermit>, Status> {
        match self.access.is_secure() {
            true => self.permit(node_id).map(Some),
            false => Ok(None),
        }
    }

    /// A permit for one more watch by `node_id`, if it has room.
    fn permit(&self, node_id: &str) -> Result<WatchPermit, Status> {
        let mut watches = self.watches.lock();
        let open = watches.entry(node_id.to_string()).or_default();
        if *open >= self.max_per_node {
            return Err(Status::resource_exhausted(format!(
                "node '{node_id}' already has {} watch streams open; close one first",
                self.max_per_node
            )));
        }
        *open += 1;
        Ok(WatchPermit {
            watches: Arc::clone(&self.watches),
            node_id: node_id.to_string(),
        })
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
        bounded(request.get_ref())?;
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "watch")?;
        let permit = self.permit_if_secure(&node_id)?;
        let revoked = self.access.until_revoked(&request);
        let request = request.into_inner();
        debug!(node_id = %request.node_id, epoch = request.epoch, revision = request.revision, "watch opened");
        let frames = self.hub.watch(request).take_until(revoked);
        Ok(Response::new(follow::holding(frames, permit)))
    }

    type FollowStream = WatchStream;

    async fn follow(
        &self,
        mut request: Request<Streaming<FollowRequest>>,
    ) -> Result<Response<Self::FollowStream>, Status> {
        let watch = follow::first_watch(request.get_mut()).await?;
        bounded(&watch)?;
        // Only a node, as itself, as for a watch.
        let node_id = watch.node_id.clone();
        self.access.node(&request, &node_id, "follow")?;
        let permit = self.permit_if_secure(&node_id)?;
        let revoked = self.access.until_revoked(&request);
        debug!(%node_id, epoch = watch.epoch, revision = watch.revision, "follow stream opened");
        let frames = follow::holding(self.hub.watch(watch).take_until(revoked), permit);
        let inbound = request.into_inner();
        let reports = Arc::clone(&self.reports);
        Ok(Response::new(follow::serve(
            frames, reports, node_id, inbound,
        )))
    }
}
