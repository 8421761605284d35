//! Spear's gRPC contracts: the messages and services shared by SMS and
//! spearlets. The `.proto` files under `proto/` are the source of truth; this
//! crate only compiles them and adds the one piece codegen cannot express,
//! pre-encoded watch frames.

pub mod auth;
pub mod frame;
pub mod patterns;
pub mod task;

/// Version 1 of the Spear protocol.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("spear.v1");
}

/// The server side of `spear.v1.Registry` whose `Watch` stream carries
/// [`frame::EncodedEvent`]s: bytes encoded once per revision and shared by every
/// stream. On the wire it is exactly `v1::registry_server`, so clients use the
/// ordinary generated `v1::registry_client`.
pub mod shared_registry {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/shared/spear.v1.Registry.rs"));
}
