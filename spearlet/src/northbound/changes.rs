//! [`Clients`]: who is told when a virtual server's tool list changes —
//! each 2025-11-25 session (`notifications/tools/list_changed`) and each
//! 2026-07-28 `subscriptions/listen` stream that asked for tool changes.
//! `watcher.rs` tells them when.

use parking_lot::Mutex;
use rmcp::model::{ServerNotification, ToolListChangedNotification};
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::RoleServer;

/// The clients of one virtual server that are told of changes.
#[derive(Default)]
pub struct Clients {
    sessions: Mutex<Vec<Peer<RoleServer>>>,
    listening: Mutex<Vec<SubscriptionSink>>,
}

impl Clients {
    /// A 2025-11-25 session, once initialized. Sessions that ended are
    /// forgotten here too, so a client opening session after session
    /// holds no more than the sessions still open.
    pub fn session(&self, peer: Peer<RoleServer>) {
        let mut sessions = self.sessions.lock();
        sessions.retain(|peer| !peer.is_transport_closed());
        sessions.push(peer);
    }

    /// A 2026-07-28 subscription that accepted tool changes.
    pub fn listening(&self, sink: SubscriptionSink) {
        self.listening.lock().push(sink);
    }

    /// Tells every client still there; forgets the others.
    pub(super) async fn tell(&self) {
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
