//! Trust events: approvals asked for and decided, pin drift nodes report,
//! and audit records new to SMS, as they happen, for whoever watches
//! (`sms events`, and the console next). Entry point: [`TrustEvents`].
//!
//! A broadcast with a bounded backlog: a watcher that falls behind is told
//! how many events it missed rather than slowing anyone down; what it
//! missed is still in `sms approvals list`, `sms pins list` and `sms audit`.

use spear_proto::v1::trust_event::Event;
use spear_proto::v1::TrustEvent;
use tokio::sync::broadcast;

/// Events kept for a slow watcher before it is told it lagged.
const BACKLOG: usize = 4096;

/// The sending half, cloned into every service that has news.
#[derive(Clone)]
pub struct TrustEvents {
    sender: broadcast::Sender<TrustEvent>,
}

impl Default for TrustEvents {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
        }
    }
}

impl TrustEvents {
    /// Tells every watcher; nobody watching is fine.
    pub fn publish(&self, event: Event) {
        let _ = self.sender.send(TrustEvent { event: Some(event) });
    }

    /// A new watcher, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<TrustEvent> {
        self.sender.subscribe()
    }
}
