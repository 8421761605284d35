//! Certificates SMS revoked, followed so the node's Invocation port
//! refuses them too. Entry point: [`follow`], which keeps one
//! `Revocations.Watch` stream open to the SMS the sync loop is connected
//! to, replaces the node's [`DenyList`] with every list SMS sends, and
//! reconnects with the shared backoff when the stream ends. A node that
//! cannot reach SMS keeps the last list it had.

use std::sync::Arc;
use std::time::Duration;

use spear_common::Backoff;
use spear_identity::{dial, DenyList, Identity, Revoked, TlsIdentity};
use spear_proto::v1::revocation::Target;
use spear_proto::v1::revocations_client::RevocationsClient;
use spear_proto::v1::{ListRevocationsRequest, RevocationList};
use tokio::sync::watch;
use tracing::{debug, info};

use crate::sync::SyncStatusCell;

/// The entries of a list SMS sent, as the deny list compares them.
fn targets(list: &RevocationList) -> Vec<Revoked> {
    list.revocations
        .iter()
        .filter_map(|r| match &r.target {
            Some(Target::Identity(identity)) => Revoked::from_wire(Some(identity), None),
            Some(Target::Serial(serial)) => Revoked::from_wire(None, Some(serial)),
            None => None,
        })
        .collect()
}

/// Follows SMS's list into `deny` until shutdown. Only with TLS: on a
/// plaintext port nobody has a certificate to revoke.
pub async fn follow(
    status: Arc<SyncStatusCell>,
    tls: TlsIdentity,
    deny: DenyList,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    loop {
        let sms = status.status.lock().sms.clone();
        if let Some(addr) = sms {
            tokio::select! {
                () = stream_once(&addr, &tls, &deny, &mut backoff) => {}
                _ = shutdown.changed() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// One stream from `addr`, applied until it ends.
async fn stream_once(addr: &str, tls: &TlsIdentity, deny: &DenyList, backoff: &mut Backoff) {
    let Ok((endpoint, dialer)) = dial(addr, Some(tls), Identity::Sms) else {
        return;
    };
    let channel = match dialer
        .connect(endpoint.connect_timeout(Duration::from_secs(5)))
        .await
    {
        Ok(channel) => channel,
        Err(error) => {
            debug!(%error, "revocation list: SMS not reached");
            return;
        }
    };
    let mut stream = match RevocationsClient::new(channel)
        .watch(ListRevocationsRequest {})
        .await
    {
        Ok(response) => response.into_inner(),
        Err(status) => {
            debug!(message = %status.message(), "revocation list: SMS refused the watch");
            return;
        }
    };
    loop {
        match stream.message().await {
            Ok(Some(list)) => {
                backoff.reset();
                let targets = targets(&list);
                if targets != deny.entries() {
                    info!(revoked = targets.len(), "revocation list from SMS applied");
                }
                deny.replace(targets);
            }
            Ok(None) => return,
            Err(status) => {
                debug!(message = %status.message(), "revocation list: stream ended");
                return;
            }
        }
    }
}
