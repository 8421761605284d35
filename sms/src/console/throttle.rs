//! Sign-in throttling per source address: a token is 32 random bytes, so
//! guessing is hopeless, but a flood of wrong sign-ins still costs SMS a
//! log line each, and says someone is trying. After [`MAX_FAILURES`]
//! wrong tokens from one address within [`WINDOW`], that address's wrong
//! tokens are answered 429 (and not logged) until the window ends. The
//! right token still signs in: otherwise anyone who shares the address
//! (any process on SMS's machine, for a loopback console) could keep the
//! operator out by sending wrong tokens.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

pub const MAX_FAILURES: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at once; beyond it the stalest window is dropped.
const MAX_SOURCES: usize = 4096;

#[derive(Default)]
pub struct SignIns {
    by_source: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl SignIns {
    /// `Err(wait)` when `source` must wait before trying again.
    pub fn check(&self, source: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let by_source = self.by_source.lock();
        match by_source.get(&source) {
            Some((since, failures)) if *failures >= MAX_FAILURES && now < *since + WINDOW => {
                Err(*since + WINDOW - now)
            }
            _ => Ok(()),
        }
    }

    /// Counts a wrong token from `source`.
    pub fn failed(&self, source: IpAddr) {
        let now = Instant::now();
        let mut by_source = self.by_source.lock();
        if by_source.len() >= MAX_SOURCES && !by_source.contains_key(&source) {
            by_source.retain(|_, (since, _)| now < *since + WINDOW);
            if by_source.len() >= MAX_SOURCES {
                let stalest = by_source
                    .iter()
                    .min_by_key(|(_, (since, _))| *since)
                    .map(|(ip, _)| *ip);
                if let Some(ip) = stalest {
                    by_source.remove(&ip);
                }
            }
        }
        let entry = by_source.entry(source).or_insert((now, 0));
        if now >= entry.0 + WINDOW {
            *entry = (now, 0);
        }
        entry.1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_source_that_keeps_failing_waits_out_the_window() {
        let throttle = SignIns::default();
        let guesser: IpAddr = [10, 0, 0, 9].into();
        let other: IpAddr = [10, 0, 0, 7].into();
        for _ in 0..MAX_FAILURES {
            assert_eq!(throttle.check(guesser), Ok(()));
            throttle.failed(guesser);
        }
        let wait = throttle.check(guesser).unwrap_err();
        assert!(wait <= WINDOW && wait > Duration::from_secs(59), "{wait:?}");
        // Someone else is not held back.
        assert_eq!(throttle.check(other), Ok(()));
        tokio::time::advance(WINDOW).await;
        assert_eq!(throttle.check(guesser), Ok(()));
    }
}
