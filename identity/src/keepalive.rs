//! TCP keepalive on both ends of a node's connection to SMS: how each
//! end finds the other gone (its host down, a partition) without a
//! message of its own. The kernel probes a connection that carried
//! nothing for a while and closes it when the probes go unanswered, and
//! closes one whose data stays unacknowledged; the peer's kernel answers
//! a probe, so a peer that is there spends no wakeup and no TLS record on
//! it. SMS's progress frames (every 60 s by default, `--progress-interval-ms`)
//! are the only messages an idle follow stream carries, so each end's
//! settings are set against them.

use std::time::Duration;

use tokio::net::TcpStream;
use tracing::debug;

/// When a connection is probed, and when it is given up.
pub(crate) struct Probes {
    /// Probed after carrying nothing either way for this long ...
    idle: Duration,
    /// ... every this long ...
    every: Duration,
    /// ... and closed after this many probes go unanswered.
    count: u32,
    /// Closed when data stays unacknowledged this long.
    unacked: Duration,
}

/// SMS's side: longer than the progress interval, whose acknowledgements
/// keep a following node's connection from ever being probed; a node
/// gone is found when a progress frame stays unacknowledged for 30 s, or
/// by the probes on a connection with no stream. The user timeout is
/// shorter than the probes' span on purpose (a vanished node is found a
/// minute sooner): only a connection without a stream is ever probed,
/// and for it one lost probe means a reconnect, not a lost node.
pub(crate) const SERVING: Probes = Probes {
    idle: Duration::from_secs(75),
    every: Duration::from_secs(5),
    count: 3,
    unacked: Duration::from_secs(30),
};

/// A dialler's side (a node following SMS): probed after 30 s without a
/// frame, so an SMS whose host went away is found within 45 s of its
/// last frame, by the node's kernel alone. SMS's HTTP/2 layer never sees
/// these probes; at 10,000 nodes its kernel answers about 330 a second.
///
/// The user timeout is the probes' whole span (30 s + 3 × 5 s): Linux
/// closes a probed connection once the user timeout has passed since the
/// peer was last heard and a probe is out, so a user timeout of 30 s let
/// one lost probe (or its lost answer) end a healthy connection at the
/// next probe. The fleet benchmark found it: loopback drops under 10,000
/// connections' bursts of probes ended 6,000 nodes' streams with
/// `ETIMEDOUT` a minute and a half after they opened.
pub(crate) const DIALING: Probes = Probes {
    idle: Duration::from_secs(30),
    every: Duration::from_secs(5),
    count: 3,
    unacked: Duration::from_secs(45),
};

impl Probes {
    /// The probes' whole span: how long a peer may go unheard, probed,
    /// before the connection is closed.
    #[cfg(test)]
    fn span(&self) -> Duration {
        self.idle + self.every * self.count
    }
}

/// Sets `probes` on `tcp`; a socket that refuses them works without
/// (logged at debug: nothing a user can do about it).
pub(crate) fn set(tcp: &TcpStream, probes: &Probes) {
    let socket = socket2::SockRef::from(tcp);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(probes.idle)
        .with_interval(probes.every)
        .with_retries(probes.count);
    let set = socket
        .set_tcp_keepalive(&keepalive)
        .and_then(|()| socket.set_tcp_user_timeout(Some(probes.unacked)));
    if let Err(error) = set {
        debug!(%error, "cannot set TCP keepalive on a connection");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's connection must survive lost probes: each of its three
    /// probes gets its turn before the user timeout closes it.
    #[test]
    fn a_nodes_probes_all_run_before_its_user_timeout() {
        assert!(
            DIALING.unacked >= DIALING.span(),
            "one lost probe would close it"
        );
    }
}
