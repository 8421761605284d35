//! Waiting for something that should happen soon.

use std::time::{Duration, Instant};

/// Polls `check` every 20 ms until it returns `Some`, or panics with `what`
/// and the last observation after `timeout`.
pub fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return value,
            Err(last) => {
                if Instant::now() >= deadline {
                    panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free loopback port (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free port: {e}"))
}
