//! Plaintext beyond loopback (`--insecure`), said loudly: what counts as
//! loopback for an address a user typed, and the warning a process repeats
//! for as long as it runs that way. Both binaries also show it in their
//! status and as a metric (`sms_insecure`, `spearlet_insecure`).

use std::net::IpAddr;
use std::time::Duration;

use tracing::warn;

/// How often the warning is repeated, so it is in every log window.
pub const REPEAT_EVERY: Duration = Duration::from_secs(10 * 60);

/// Whether `addr` (`host:port`, `[v6]:port` or a URL) names this machine:
/// a loopback IP or `localhost`. Any other name may resolve anywhere, so
/// it is not loopback.
pub fn is_loopback(addr: &str) -> bool {
    let rest = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Logs `what` (the process and why it is insecure) as a warning now and
/// every [`REPEAT_EVERY`] for as long as the runtime runs.
pub fn warn_loudly(what: String) {
    let sentence = format!(
        "INSECURE: {what}; anyone who can reach it can read registry secrets and act as a node. Configure TLS (docs/security.md)"
    );
    warn!("{sentence}");
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REPEAT_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            warn!("{sentence}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_and_localhost_are_loopback() {
        for addr in [
            "127.0.0.1:7300",
            "127.9.9.9:1",
            "[::1]:7300",
            "localhost:7300",
            "http://127.0.0.1:7300",
            "https://LOCALHOST:7300/x",
        ] {
            assert!(is_loopback(addr), "{addr}");
        }
        for addr in [
            "10.0.0.1:7300",
            "0.0.0.0:7300",
            "sms.example.com:7300",
            "localhost.evil.com:1",
            "http://[fe80::1]:7300",
            "[::]:1",
        ] {
            assert!(!is_loopback(addr), "{addr}");
        }
    }
}
