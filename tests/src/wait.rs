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

/// A free port for a test peer to listen on.
///
/// Picked at random below the kernel's ephemeral range (32768–60999 here),
/// then checked free: a port the kernel handed out for `:0` is in that
/// range, and so is the local port of every outgoing connection, so a port
/// taken from it could be taken again by any other test's connection before
/// the peer binds it (seen in full runs: a peer that printed "running on
/// port …" and exited). Ports are not repeated within one test process.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let port = rand::random_range(20000..32768);
        if given.contains(&port) {
            continue;
        }
        let free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
            && std::net::TcpListener::bind(("0.0.0.0", port)).is_ok();
        if free {
            given.push(port);
            return port;
        }
    }
    panic!("cannot find a free port between 20000 and 32767")
}
