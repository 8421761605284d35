//! [`Router::usable`]: the servers a session may use here, each with its
//! catalog. A guest's tool set and a northbound client's list are both
//! built from it, under the same verdicts.

use std::sync::Arc;

use spear_proto::v1::ServerSpec;
use tracing::debug;

use super::Router;
use crate::connections::Catalog;
use crate::tool_policy::{server_verdict, SessionPolicy, TaskPolicy};

/// A server a session may use, with its catalog ([`Router::usable`]).
pub struct Usable {
    pub spec: ServerSpec,
    pub catalog: Arc<Catalog>,
}

impl Router {
    /// The servers the policy lets `session` use, in the session's order,
    /// each with its catalog; servers not connected yet are connected
    /// concurrently, and one that cannot be used is left out. What a
    /// guest's request and a northbound client's list are both built from.
    pub async fn usable(&self, task: &TaskPolicy, session: &SessionPolicy) -> Vec<Usable> {
        let view = self.registry.current();
        let mut seen = std::collections::BTreeSet::new();
        let eligible: Vec<&ServerSpec> = session
            .server_ids
            .iter()
            .filter(|id| seen.insert(id.as_str()))
            .filter_map(|id| {
                let spec = view.servers.get(id).and_then(|r| r.spec.as_ref());
                server_verdict(task, session, id, spec, Ok(()))
                    .offered
                    .then_some(spec?)
            })
            .collect();
        let catalogs = futures::future::join_all(eligible.iter().map(|spec| {
            self.connections
                .catalog_for(&spec.id, self.trust.scope.on_behalf.as_ref())
        }))
        .await;
        let mut usable = Vec::with_capacity(eligible.len());
        for (spec, catalog) in eligible.into_iter().zip(catalogs) {
            match catalog {
                Ok(catalog) => usable.push(Usable {
                    spec: spec.clone(),
                    catalog,
                }),
                Err(error) => {
                    debug!(server_id = %spec.id, %error, "server unusable; its tools are not offered");
                }
            }
        }
        usable
    }
}
