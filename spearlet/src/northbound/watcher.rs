//! [`watch`]: the task that tells a virtual server's clients
//! ([`Clients`](super::changes::Clients)) when its tool list changes.
//!
//! The list is computed by the code every `tools/list` runs
//! ([`VirtualTools::list`](super::VirtualTools::list)), whenever the node's
//! registry changes and once a second besides (an upstream's
//! `list_changed`, a pin approved or drifted: the router lists such a
//! server again), and clients are told only when what they would be listed
//! differs from what they were, so a change nobody sees tells nobody.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::handler::VirtualServer;
use super::listing::Listing;

/// How often the list is computed again between registry changes.
const EVERY: Duration = Duration::from_secs(1);

/// Tells `server`'s clients of each change of its tool list, until `stop`.
pub async fn watch(server: VirtualServer, stop: CancellationToken) {
    let mut registry = server.router.registry_changes();
    let mut last = fingerprint(&server.tools.list(&server.router).await);
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
            // The registry ends only with the node.
            changed = registry.changed() => if changed.is_err() { return },
        }
        let now = fingerprint(&server.tools.list(&server.router).await);
        if now != last {
            last = now;
            debug!(virtual_server = %server.name(), "tool list changed; telling its clients");
            server.clients.tell().await;
        }
    }
}

/// What a client would be listed, as one number: names and definitions.
fn fingerprint(listing: &Listing) -> u64 {
    let mut hasher = DefaultHasher::new();
    for tool in &listing.tools {
        serde_json::to_string(tool)
            .unwrap_or_default()
            .hash(&mut hasher);
    }
    hasher.finish()
}
