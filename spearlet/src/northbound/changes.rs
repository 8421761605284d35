//! [`Clients`]: who is told when a virtual server's tool list changes —
//! each 2025-11-25 session (`notifications/tools/list_changed`) and each
//! 2026-07-28 `subscriptions/listen` stream that asked for tool changes —
//! and [`watch`], the task that tells them.
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

use parking_lot::Mutex;
use rmcp::model::{ServerNotification, ToolListChangedNotification};
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::RoleServer;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::handler::VirtualServer;
use super::listing::Listing;

/// How often the list is computed again between registry changes.
const EVERY: Duration = Duration::from_secs(1);

/// The clients of one virtual server that are told of changes.
#[derive(Default)]
pub struct Clients {
    sessions: Mutex<Vec<Peer<RoleServer>>>,
    listening: Mutex<Vec<SubscriptionSink>>,
}

impl Clients {
    /// A 2025-11-25 session, once initialized.
    pub fn session(&self, peer: Peer<RoleServer>) {
        self.sessions.lock().push(peer);
    }

    /// A 2026-07-28 subscription that accepted tool changes.
    pub fn listening(&self, sink: SubscriptionSink) {
        self.listening.lock().push(sink);
    }

    /// Tells every client still there; forgets the others.
    async fn tell(&self) {
        let sessions: Vec<Peer<RoleServer>> = {
            let mut sessions = self.sessions.lock();
            sessions.retain(|peer| !peer.is_transport_closed());
            sessions.clone()
        };
        for peer in sessions {
            let _ = peer.notify_tool_list_changed().await;
        }
        let listening: Vec<SubscriptionSink> = self.listening.lock().clone();
        let mut closed = Vec::new();
        for sink in listening {
            let changed = ServerNotification::ToolListChangedNotification(
                ToolListChangedNotification::default(),
            );
            if sink.send(changed).await.is_err() {
                closed.push(sink.id().clone());
            }
        }
        self.listening
            .lock()
            .retain(|sink| !closed.contains(sink.id()));
    }
}

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
