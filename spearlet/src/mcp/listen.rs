//! How a 2026-07-28 server says its tools changed. Entry point: [`spawn`].
//!
//! In that generation a server sends `notifications/tools/list_changed`
//! only on a `subscriptions/listen` stream the client opened for it (an
//! older server sends it unasked, and [`super::client`]'s handler takes
//! it). So for a session of that generation the node opens one stream
//! asking for tool list changes, and bumps the same counter the older
//! notification bumps: the catalog lists the server's tools again and
//! passes them through the pins. The stream lives as long as the session.
//!
//! States: *opening* (the request is sent; the server acknowledges what
//! it honours; the session is handed out only then, within a bound) →
//! *listening* (each change bumps the counter) → *ended*:
//! by the server or the transport (the session is over), or because the
//! node read too slowly (`Lagged`: changes may have been missed, so the
//! counter is bumped once and the stream opened again).

use std::sync::Arc;

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionEnd};
use rmcp::RoleClient;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info};

/// The protocol version whose servers need the stream.
pub const LISTEN_VERSION: &str = "2026-07-28";

/// Opens the stream for `server` when the session speaks `version`;
/// the task ends with the session. The receiver completes once the server
/// acknowledged the stream (or has none to give): a session handed out
/// before then would miss a change announced at once.
pub fn spawn(
    peer: Peer<RoleClient>,
    version: Option<String>,
    server: Arc<str>,
    tools_changed: Arc<watch::Sender<u64>>,
) -> Option<(JoinHandle<()>, oneshot::Receiver<()>)> {
    if version.as_deref() != Some(LISTEN_VERSION) {
        return None;
    }
    let (opened, ready) = oneshot::channel();
    let task = tokio::spawn(listen(peer, server, tools_changed, opened));
    Some((task, ready))
}

async fn listen(
    peer: Peer<RoleClient>,
    server: Arc<str>,
    tools_changed: Arc<watch::Sender<u64>>,
    opened: oneshot::Sender<()>,
) {
    // Told once, when the first stream is acknowledged; dropped (which
    // tells too) when there is none.
    let mut opened = Some(opened);
    loop {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut stream = match peer.listen(filter).await {
            Ok(stream) => stream,
            Err(error) => {
                // A server that offers no stream has nothing to announce;
                // the re-list bound still catches its changes.
                debug!(server_id = %server, %error, "no subscriptions/listen stream");
                return;
            }
        };
        if stream.acknowledged().tools_list_changed != Some(true) {
            debug!(server_id = %server, "the server does not announce tool list changes");
            return;
        }
        info!(server_id = %server, "listening for tool list changes (subscriptions/listen)");
        if let Some(opened) = opened.take() {
            let _ = opened.send(());
        }
        while let Ok(Some(notification)) = stream.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                tools_changed.send_modify(|n| *n += 1);
            }
        }
        match stream.end() {
            Some(SubscriptionEnd::Lagged { .. }) => {
                // Changes may have been dropped: list again, listen again.
                tools_changed.send_modify(|n| *n += 1);
            }
            _ => return,
        }
    }
}
