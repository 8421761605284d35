//! The guard as HTTP clients and forwarders hold it: [`Egress`] checks an
//! address or a URL whose host is one, and [`EgressResolver`] is the DNS
//! resolver that hands a client only the addresses that pass.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::policy::{EgressPolicy, EgressRefused};

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

    /// A guard whose policy never changes (SMS's, from its flags).
    pub fn fixed(policy: EgressPolicy) -> Egress {
        let policy = Arc::new(policy);
        Egress::new(move || Arc::clone(&policy))
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
