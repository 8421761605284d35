//! Where the node may connect on behalf of server files and tasks: the
//! egress guard for MCP HTTP servers and module fetches. Addresses that
//! reach the node itself or its private network — loopback, private,
//! link-local (and cloud metadata), unique-local, shared (CGNAT),
//! unspecified, multicast, reserved — are refused unless `policy.egress`
//! lists a range holding them. Public addresses are allowed.
//!
//! A name is resolved once, by [`EgressResolver`], and only addresses that
//! pass are handed to the connector, which connects to exactly those: DNS
//! rebinding cannot swap in a refused address between the check and the
//! connect. A URL whose host is an address is checked by [`Egress::check_url`]
//! (the HTTP client does not resolve it).
//!
//! LLM backends are the operator's own configuration and are not guarded.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

use super::PolicyError;

/// Why an address is not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Loopback,
    Private,
    LinkLocal,
    /// A cloud provider's instance metadata service.
    Metadata,
    UniqueLocal,
    /// 100.64.0.0/10, carrier-grade NAT.
    Shared,
    Unspecified,
    Multicast,
    /// Documentation, benchmarking, broadcast and other reserved ranges.
    Reserved,
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Range::Loopback => "loopback",
            Range::Private => "private",
            Range::LinkLocal => "link-local",
            Range::Metadata => "cloud metadata",
            Range::UniqueLocal => "unique-local",
            Range::Shared => "shared (CGNAT)",
            Range::Unspecified => "unspecified",
            Range::Multicast => "multicast",
            Range::Reserved => "reserved",
        })
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Range> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) => {
            Range::Metadata
        }
        (0, ..) => Range::Unspecified,
        (127, ..) => Range::Loopback,
        (10, ..) | (192, 168, _) => Range::Private,
        (172, 16..=31, _) => Range::Private,
        (169, 254, _) => Range::LinkLocal,
        (100, 64..=127, _) => Range::Shared,
        (224..=239, ..) => Range::Multicast,
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) | (198, 18..=19, _) => {
            Range::Reserved
        }
        (240..=255, ..) => Range::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Range> {
    // An IPv4 address written as IPv6 is that IPv4 address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let first = ip.segments()[0];
    Some(match ip {
        _ if ip.is_unspecified() => Range::Unspecified,
        _ if ip.is_loopback() => Range::Loopback,
        // AWS's metadata service over IPv6.
        _ if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) => Range::Metadata,
        _ if first & 0xfe00 == 0xfc00 => Range::UniqueLocal,
        _ if first & 0xffc0 == 0xfe80 => Range::LinkLocal,
        _ if first & 0xff00 == 0xff00 => Range::Multicast,
        // NAT64 of an address: judged as that address.
        _ if ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => {
            let [.., a, b] = ip.segments();
            let v4 = Ipv4Addr::from((u32::from(a) << 16) | u32::from(b));
            return classify_v4(v4);
        }
        _ if first == 0x2001 && ip.segments()[1] == 0x0db8 => Range::Reserved,
        _ => return None,
    })
}

/// What kind of address `ip` is; `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<Range> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The node's egress allow-list (`policy.egress`), checked.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    allowed: Vec<IpNet>,
}

/// The node refused an address.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{host} is a {range} address; this node connects there only if its policy.egress lists a range holding it (for example \"{net}\")")]
pub struct EgressRefused {
    /// The host as written (a name, or the address itself).
    pub host: String,
    pub range: Range,
    /// The narrowest range that would allow it, for the sentence.
    pub net: IpNet,
}

impl EgressPolicy {
    pub fn build(section: &[String]) -> Result<EgressPolicy, PolicyError> {
        let allowed = section
            .iter()
            .map(|entry| {
                entry.parse::<IpNet>().or_else(|_| entry.parse::<IpAddr>().map(IpNet::from)).map_err(|_| PolicyError {
                    setting: "egress".into(),
                    why: format!("'{entry}' is not an address or a range; write one such as \"10.0.0.0/8\" or \"127.0.0.1\""),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(EgressPolicy { allowed })
    }

    /// Whether the node may connect to `ip` for `host`.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), EgressRefused> {
        let Some(range) = classify(ip) else {
            return Ok(());
        };
        if self.allowed.iter().any(|net| net.contains(&ip)) {
            return Ok(());
        }
        Err(EgressRefused {
            host: host.to_string(),
            range,
            net: IpNet::from(ip),
        })
    }
}

/// The guard as the HTTP clients hold it: the policy in force at each
/// connection, so a reloaded policy applies to the next one.
#[derive(Clone)]
pub struct Egress {
    current: Arc<dyn Fn() -> Arc<EgressPolicy> + Send + Sync>,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Egress")
    }
}

impl Egress {
    pub fn new(current: impl Fn() -> Arc<EgressPolicy> + Send + Sync + 'static) -> Egress {
        Egress {
            current: Arc::new(current),
        }
    }

    /// Checks a URL whose host is an address; a name passes here and is
    /// checked by the resolver.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), EgressRefused> {
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            _ => return Ok(()),
        };
        (self.current)().check(&ip.to_string(), ip)
    }

    /// Checks one address `host` resolved to, with the policy in force.
    pub fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), EgressRefused> {
        (self.current)().check(host, ip)
    }

    /// Checks a URL's host now, resolving a name: the sentence a caller
    /// can act on. The client's [`EgressResolver`] checks again at the
    /// connect, so a name that changes its answer in between gains nothing.
    pub async fn check_reachable(&self, url: &reqwest::Url) -> Result<(), EgressRefused> {
        self.check_url(url)?;
        let Some(url::Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        let Ok(found) = tokio::net::lookup_host((name, 0)).await else {
            // Not resolvable: the connect says so in its own words.
            return Ok(());
        };
        let policy = (self.current)();
        let mut refused = None;
        for addr in found {
            match policy.check(name, addr.ip()) {
                Ok(()) => return Ok(()),
                Err(error) => refused = refused.or(Some(error)),
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// The resolver to give an HTTP client that must obey this guard.
    pub fn resolver(&self) -> Arc<EgressResolver> {
        Arc::new(EgressResolver {
            egress: self.clone(),
        })
    }
}

/// A DNS resolver that drops the addresses the guard refuses, and fails
/// with the refusal when none is left.
pub struct EgressResolver {
    egress: Egress,
}

impl reqwest::dns::Resolve for EgressResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let egress = self.egress.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let policy = (egress.current)();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|addr| match policy.check(&host, addr.ip()) {
                    Ok(()) => true,
                    Err(error) => {
                        refused.get_or_insert(error);
                        false
                    }
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(error)) => {
                    Err(Box::new(error) as Box<dyn std::error::Error + Send + Sync>)
                }
                _ => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn every_non_public_range_is_named() {
        let cases = [
            ("127.0.0.1", Some(Range::Loopback)),
            ("127.255.0.9", Some(Range::Loopback)),
            ("::1", Some(Range::Loopback)),
            ("::ffff:127.0.0.1", Some(Range::Loopback)),
            ("10.1.2.3", Some(Range::Private)),
            ("172.16.0.1", Some(Range::Private)),
            ("172.31.255.255", Some(Range::Private)),
            ("192.168.1.1", Some(Range::Private)),
            ("::ffff:10.0.0.1", Some(Range::Private)),
            ("169.254.169.254", Some(Range::Metadata)),
            ("100.100.100.200", Some(Range::Metadata)),
            ("fd00:ec2::254", Some(Range::Metadata)),
            ("169.254.10.1", Some(Range::LinkLocal)),
            ("fe80::1", Some(Range::LinkLocal)),
            ("fd12:3456::1", Some(Range::UniqueLocal)),
            ("fc00::1", Some(Range::UniqueLocal)),
            ("100.64.0.1", Some(Range::Shared)),
            ("0.0.0.0", Some(Range::Unspecified)),
            ("::", Some(Range::Unspecified)),
            ("224.0.0.1", Some(Range::Multicast)),
            ("ff02::1", Some(Range::Multicast)),
            ("255.255.255.255", Some(Range::Reserved)),
            ("192.0.2.10", Some(Range::Reserved)),
            ("2001:db8::1", Some(Range::Reserved)),
            ("64:ff9b::a9fe:a9fe", Some(Range::Metadata)),
            ("64:ff9b::7f00:1", Some(Range::Loopback)),
            ("8.8.8.8", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("2606:4700::1111", None),
        ];
        for (text, want) in cases {
            assert_eq!(classify(ip(text)), want, "{text}");
        }
    }

    #[test]
    fn the_policy_allows_exactly_the_ranges_it_lists() {
        let none = EgressPolicy::default();
        let error = none
            .check("metadata.internal", ip("169.254.169.254"))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "metadata.internal is a cloud metadata address; this node connects there only if its policy.egress lists a range holding it (for example \"169.254.169.254/32\")"
        );
        assert!(none.check("dns.google", ip("8.8.8.8")).is_ok());
        let some = EgressPolicy::build(&["10.0.0.0/8".into(), "127.0.0.1".into()]).unwrap();
        assert!(some.check("a", ip("10.9.9.9")).is_ok());
        assert!(some.check("a", ip("127.0.0.1")).is_ok());
        assert!(some.check("a", ip("127.0.0.2")).is_err());
        assert!(some.check("a", ip("192.168.0.1")).is_err());
        let error = EgressPolicy::build(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("policy.egress: '10.0.0.0/33' is not"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn names_resolving_to_refused_addresses_are_refused_by_the_resolver() {
        use reqwest::dns::Resolve;
        let guard = Egress::new(|| Arc::new(EgressPolicy::default()));
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let error = match guard.resolver().resolve(name).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(error) => error.to_string(),
        };
        assert!(
            error.starts_with("localhost is a loopback address"),
            "{error}"
        );
        let allowed = Egress::new(|| {
            Arc::new(EgressPolicy::build(&["127.0.0.0/8".into(), "::1".into()]).unwrap())
        });
        let addrs: Vec<_> = allowed
            .resolver()
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()));
        let url: reqwest::Url = "http://[::ffff:127.0.0.1]:8080/mcp".parse().unwrap();
        assert!(guard.check_url(&url).is_err());
        let by_name: reqwest::Url = "http://localhost:8080/mcp".parse().unwrap();
        let error = guard.check_reachable(&by_name).await.unwrap_err();
        assert_eq!(error.host, "localhost");
        assert!(allowed.check_reachable(&by_name).await.is_ok());
        assert!(guard
            .check_url(&"http://example.com/".parse().unwrap())
            .is_ok());
    }
}
