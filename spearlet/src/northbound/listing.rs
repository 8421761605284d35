//! What one virtual server offers: [`VirtualTools::list`].
//!
//! The virtual server becomes a task and session policy (its servers
//! allowed and on, nothing else), so the router's [`Router::usable`] picks
//! its servers exactly as for a guest: the server's own allow and deny
//! lists, the node's policy, the pins (a tool not as pinned is not listed).
//! Each offer's patterns then narrow its server's tools, and
//! [`Names`](spear_proto::exposed::Names) names them in the order the
//! offers are declared.

use std::sync::Arc;

use rmcp::model::Tool;
use spear_proto::exposed::Names;
use spear_proto::patterns::glob_match;
use spear_proto::v1::{VirtualOffer, VirtualServerSpec};
use tracing::debug;

use crate::tool_policy::{tool_verdict, SessionPolicy, TaskPolicy};
use crate::tools::{Allowed, CallRefused, Router, ToolRef};

/// A virtual server, as the policy it stands for.
pub struct VirtualTools {
    spec: Arc<VirtualServerSpec>,
    task: TaskPolicy,
    session: SessionPolicy,
}

/// One computation of what a virtual server offers.
#[derive(Debug, Default)]
pub struct Listing {
    /// The definitions clients see, as the servers listed them (and as
    /// pinned), each under its exposed name.
    pub tools: Vec<Tool>,
    /// Exposed name → the server and upstream tool.
    names: Names,
}

impl Listing {
    /// The server and upstream tool `name` stands for, if it is offered.
    pub fn resolve(&self, name: &str) -> Option<ToolRef> {
        self.names.resolve(name).map(|(server, tool)| ToolRef {
            server: server.to_string(),
            tool: tool.to_string(),
        })
    }
}

impl VirtualTools {
    pub fn new(spec: VirtualServerSpec) -> Self {
        let ids: Vec<String> = spec.offers.iter().map(|o| o.server_id.clone()).collect();
        let task = TaskPolicy {
            enabled: true,
            allowed_server_ids: ids.clone(),
            default_server_ids: ids,
            ..TaskPolicy::default()
        };
        let session = SessionPolicy::from_task(&task);
        Self {
            spec: Arc::new(spec),
            task,
            session,
        }
    }

    pub fn spec(&self) -> &VirtualServerSpec {
        &self.spec
    }

    /// The policy calls are checked and run under.
    pub fn task(&self) -> &TaskPolicy {
        &self.task
    }

    /// Every tool the virtual server offers now, through `router`.
    pub async fn list(&self, router: &Router) -> Listing {
        let mut listing = Listing::default();
        for usable in router.usable(&self.task, &self.session).await {
            let Some(offer) = self.offer(&usable.spec.id) else {
                continue;
            };
            for tool in &usable.catalog.tools {
                let name = tool.name.as_ref();
                if !tool_verdict(&self.task, &self.session, &usable.spec, name).offered
                    || !offers(offer, name)
                {
                    continue;
                }
                let alias = offer.aliases.get(name).map(String::as_str);
                match listing.names.add(&usable.spec.id, name, alias) {
                    Ok(exposed) => {
                        let mut tool = tool.clone();
                        tool.name = exposed.into();
                        listing.tools.push(tool);
                    }
                    // Another tool has its name: the earlier keeps it.
                    Err(refused) => debug!(virtual_server = %self.spec.name, "{refused}"),
                }
            }
        }
        listing
    }

    /// Whether the policy allows `target` now: the router's check of every
    /// call, under this virtual server's policy.
    pub fn allow(&self, router: &Router, target: ToolRef) -> Result<Allowed, CallRefused> {
        router.allow(&self.task, &self.session, target)
    }

    /// The ids of its servers the policy lets it use now, in the order
    /// the offers are declared.
    pub(super) async fn servers(&self, router: &Router) -> Vec<String> {
        let usable = router.usable(&self.task, &self.session).await;
        usable.into_iter().map(|u| u.spec.id).collect()
    }

    /// The name `server`'s offer gives its `name`, if it aliases it.
    pub(super) fn alias(&self, server: &str, name: &str) -> Option<&str> {
        let offer = self.offer(server)?;
        offer.aliases.get(name).map(String::as_str)
    }

    fn offer(&self, server_id: &str) -> Option<&VirtualOffer> {
        self.spec.offers.iter().find(|o| o.server_id == server_id)
    }
}

/// Whether `offer`'s patterns take `tool` (no patterns: every tool).
fn offers(offer: &VirtualOffer, tool: &str) -> bool {
    offer
        .tools
        .as_ref()
        .is_none_or(|t| t.patterns.iter().any(|p| glob_match(p, tool)))
}
