//! Who is calling, for SMS and for nodes (docs/security.md, "Who may call what").
//!
//! - [`spiffe`]: identities as SPIFFE IDs under one trust domain.
//! - [`TlsFiles`] → [`TlsIdentity`]: a process's certificate, key and CA
//!   bundle, reloaded from disk when they change ([`reload`]).
//! - [`incoming()`] (servers) and [`dial`] (clients): gRPC connections in
//!   plaintext or mutual TLS; a server learns each connection's [`Peer`].
//!   [`HttpListener`]: the metrics endpoint on the same footing, over TLS
//!   when the process has it.
//! - [`Access`]: the authorization matrix, one method per kind of call, and
//!   its [`Gate`], which refuses callers without a credential before their
//!   request body is read; [`DenyList`]: revoked certificates.
//! - [`ServiceTls`]: TLS to a service that is not Spear's (etcd), its
//!   material re-read when it changes.
//! - [`AdminToken`]: the admin token file, an alternative admin credential;
//!   [`JoinToken`]: the node join token, a node's credential on plaintext.
#![forbid(unsafe_code)]

mod access;
mod admission;
mod configs;
mod connector;
mod gate;
mod https;
mod incoming;
mod keepalive;
mod material;
mod node_token;
pub mod oidc;
pub mod reload;
pub mod revoked;
mod service_tls;
pub mod spiffe;
#[cfg(test)]
mod test_certs;
mod tickets;
mod tls;
mod token;

pub use access::{Access, Caller, PRINCIPAL_TOKEN_HEADER};
pub use admission::{dropped_for_newer, Bounds};
pub use connector::{dial, BadAddress, Dialer, Renewed};
pub use gate::{Deadlines, Gate, Gated};
pub use https::{reads_reports, HttpListener};
pub use incoming::{
    incoming, incoming_within, listen, server, Conn, Peer, Protocol, MAX_HEADER_BYTES,
    MAX_STREAMS_PER_CONNECTION,
};
pub use material::{Material, TlsError, TlsFiles};
pub use node_token::{
    is_join_token, node_token_id, JoinClaim, NodeTokens, TokenRefusal, MAX_JOIN_TTL_S,
};
pub use oidc::{OidcConfig, OidcVerifier, TokenRefused};
pub use revoked::{DenyList, Revoked};
pub use service_tls::{ServiceTls, ServiceTlsFiles};
pub use spiffe::{Identity, IdentityError, TrustDomain};
pub use tls::{FlagsError, TlsFlags, TlsIdentity};
pub use token::{
    AdminToken, JoinToken, Presented, TokenError, TokenKind, ViewerToken, JOIN_TOKEN_HEADER,
    MIN_TOKEN_LEN,
};
