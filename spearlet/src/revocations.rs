//! Certificates SMS revoked, followed so the node's Invocation port
//! refuses them too. Entry point: [`follow`], which keeps one
//! `Revocations.Watch` stream open to the SMS the node follows, replaces the node's [`DenyList`] with every list SMS sends, and
//! reconnects with the shared backoff when the stream ends. A node that
//! cannot reach SMS keeps the last list it had.

use std::time::Duration;

use spear_common::Backoff;
use spear_identity::{DenyList, Revoked};
use spear_proto::v1::revocation::Target;
use spear_proto::v1::revocations_client::RevocationsClient;
use spear_proto::v1::{ListRevocationsRequest, RevocationList};
use tokio::sync::watch;
use tonic::transport::Channel;
use tracing::{debug, info};

use crate::sms_link::SmsLink;

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
pub async fn follow(link: SmsLink, deny: DenyList, mut shutdown: watch::Receiver<bool>) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    loop {
        if let Ok(client) = link.revocations() {
            tokio::select! {
                () = stream_once(client, &deny, &mut backoff) => {}
                _ = shutdown.changed() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// One stream from the SMS the node follows, applied until it ends.
async fn stream_once(
    mut client: RevocationsClient<Channel>,
    deny: &DenyList,
    backoff: &mut Backoff,
) {
    let mut stream = match client.watch(ListRevocationsRequest {}).await {
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
