//! Where a process may connect when a peer names the place: the egress
//! guard of a node (MCP HTTP servers, module fetches, a sandbox's
//! forwarded destinations) and of SMS (the URLs a protected server's OAuth
//! metadata names). Addresses that reach the host itself or its private
//! network — loopback, private, link-local (and cloud metadata),
//! unique-local, shared (CGNAT), unspecified, multicast, reserved — are
//! refused unless the allow-list ([`EgressPolicy`]) holds them. Public
//! addresses are allowed.
//!
//! Entry point: [`Egress`]. A name is resolved once, by its
//! [`EgressResolver`], and only addresses that pass are handed to the
//! connector, which connects to exactly those: DNS rebinding cannot swap
//! in a refused address between the check and the connect. A URL whose
//! host is an address is checked by [`Egress::check_url`] (an HTTP client
//! does not resolve it).
#![forbid(unsafe_code)]

mod guard;
mod policy;
mod ranges;

pub use guard::{Egress, EgressResolver};
pub use policy::{EgressError, EgressPolicy, EgressRefused, Setting};
pub use ranges::{classify, Range};

#[cfg(test)]
mod tests;
