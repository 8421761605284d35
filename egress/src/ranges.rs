//! What kind of address an IP is: public, or one of the ranges that reach
//! a host itself or its private network, each named for the sentence that
//! refuses it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
