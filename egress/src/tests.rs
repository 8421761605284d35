use std::net::IpAddr;
use std::sync::Arc;

use crate::*;

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
            .starts_with("'10.0.0.0/33' is not an address or a range"),
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
