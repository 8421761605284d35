//! Keeping a fresh TLS session ticket for SMS: [`keep_fresh`].
//!
//! When SMS restarts, every node reconnects at once, and a node that holds
//! a ticket from SMS resumes its TLS session instead of proving its
//! certificate again, which is most of what a reconnect costs SMS
//! (docs/benchmarks.md). A ticket resumes for at most a week, and a node
//! gets one only when it opens a connection, while the connection it
//! follows SMS on may stay open for months. So, once a day, the node opens
//! a TLS connection to the SMS it follows only to be given a new ticket
//! (`spear_identity::Dialer::renew_ticket`), and closes it. For 10,000
//! nodes that is one resumed handshake every 9 s.

use std::time::Duration;

use tokio::sync::watch;
use tracing::debug;

use crate::sms_link::SmsLink;

/// How often a node renews its ticket: well within a ticket's week.
pub const RENEW_EVERY: Duration = Duration::from_secs(24 * 3600);

/// Renews the node's ticket every [`RENEW_EVERY`] (give or take a tenth,
/// so that a fleet started together does not renew together) until
/// `shutdown`. Run only with TLS.
pub async fn keep_fresh(link: SmsLink, mut shutdown: watch::Receiver<bool>) {
    loop {
        let spread: f64 = rand::random_range(0.9..1.1);
        tokio::select! {
            _ = tokio::time::sleep(RENEW_EVERY.mul_f64(spread)) => {}
            _ = shutdown.changed() => return,
        }
        // A failure costs only the speed of the next reconnect: the
        // ticket held, or a full handshake, serves then.
        match link.renew_ticket().await {
            Ok(Some(renewed)) => debug!(?renewed, "TLS session ticket renewed"),
            Ok(None) => {}
            Err(error) => debug!(%error, "TLS session ticket not renewed"),
        }
    }
}
