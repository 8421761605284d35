//! How a node waits between attempts to reach SMS: [`Retry`].
//!
//! Two kinds of failure, two paces. An attempt that SMS saw (a handshake
//! it dropped or timed out, a stream that broke or that it ended) cost SMS
//! something, so the node backs off from 100 ms to 5 s, jittered, as every
//! reconnecting part of Spear does. An attempt that nobody saw (the
//! connection refused: no process listening, as while SMS restarts) cost
//! SMS nothing, so the node tries again within a second at most. That is
//! what brings a fleet back soon after a restart: before, the nodes whose
//! tries were refused during the stop slept up to 3.2 s more while the new
//! SMS already listened, idle (docs/benchmarks.md). The first connection
//! the new SMS accepts puts its node back on the slow pace, so a fleet
//! arriving at an SMS it overloads still spreads out.

use std::time::Duration;

use spear_common::Backoff;

/// The two paces, each jittered (see [`Backoff`]).
#[derive(Debug, Clone)]
pub struct Retry {
    seen: Backoff,
    refused: Backoff,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            seen: Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
            refused: Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
        }
    }
}

impl Retry {
    /// The wait before the next attempt, after one that failed;
    /// `nobody_listening` when its connection was refused.
    pub fn next_delay(&mut self, nobody_listening: bool) -> Duration {
        if nobody_listening {
            self.refused.next_delay()
        } else {
            self.refused.reset();
            self.seen.next_delay()
        }
    }

    /// Call once the stream works (an event applied): the next failure
    /// starts from the shortest wait again.
    pub fn reset(&mut self) {
        self.seen.reset();
        self.refused.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sms_link::nobody_listening;

    #[test]
    fn refused_attempts_are_retried_within_a_second_and_seen_ones_back_off_to_five() {
        let mut retry = Retry::default();
        let refused: Vec<Duration> = (0..12).map(|_| retry.next_delay(true)).collect();
        assert!(
            refused.iter().all(|d| *d <= Duration::from_secs(1)),
            "{refused:?}"
        );
        assert!(
            refused[8..]
                .iter()
                .all(|d| *d >= Duration::from_millis(500)),
            "{refused:?}"
        );
        // SMS answered and then failed: the slow pace, from its start.
        let seen: Vec<Duration> = (0..12).map(|_| retry.next_delay(false)).collect();
        assert!(seen[0] <= Duration::from_millis(100), "{seen:?}");
        assert!(seen[11] >= Duration::from_millis(2500), "{seen:?}");
        // Refused again: the fast pace starts over; the slow one keeps its place.
        assert!(retry.next_delay(true) <= Duration::from_millis(100));
        assert!(retry.next_delay(false) >= Duration::from_millis(2500));
        retry.reset();
        assert!(retry.next_delay(false) <= Duration::from_millis(100));
    }

    /// An address on which nothing listens (the port was just freed).
    async fn closed_port() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        addr.to_string()
    }

    #[tokio::test]
    async fn a_port_nobody_listens_on_is_told_apart_from_one_that_does_not_answer() {
        // Through the node's own dialling, as the sync loop sees it.
        let link = crate::sms_link::SmsLink::new(vec![], None, Default::default());
        let refused = link.connect(&closed_port().await).await.unwrap_err();
        assert!(
            matches!(
                refused,
                crate::sms_link::LinkError::Connect {
                    nobody_listening: true,
                    ..
                }
            ),
            "{refused:?}"
        );
        // A listener that accepts and never answers: SMS saw the attempt.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let ended = tokio::spawn(async move {
            let (tcp, _) = silent.accept().await.unwrap();
            drop(tcp);
        });
        let broken = link.connect(&addr).await;
        ended.await.unwrap();
        if let Err(e) = broken {
            assert!(
                matches!(
                    e,
                    crate::sms_link::LinkError::Connect {
                        nobody_listening: false,
                        ..
                    }
                ),
                "{e:?}"
            );
        }
        let wrapped =
            std::io::Error::other(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(nobody_listening(&wrapped));
        assert!(!nobody_listening(&std::io::Error::from(
            std::io::ErrorKind::TimedOut
        )));
    }
}
