//! Spear's gRPC contracts: the messages and services shared by SMS and
//! spearlets. The `.proto` files under `proto/` are the source of truth; this
//! crate only compiles them and adds the one piece codegen cannot express,
//! pre-encoded watch frames.
#![forbid(unsafe_code)]

pub mod approvals;
pub mod audit;
pub mod codec;
pub mod defaults;
pub mod exposed;
pub mod frame;
pub mod labels;
pub mod patterns;
pub mod pins;
pub mod principal;
pub mod quota;
pub mod refs;
pub mod scope;
pub mod suggest;
pub mod task;
mod task_error;
pub mod usage;

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

/// The URL tonic needs for an address operators write as `host:port` (or
/// already as a URL).
pub fn grpc_url(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}

/// Largest guest input (standard input) accepted by SMS and by nodes.
pub const MAX_INPUT_BYTES: usize = 16 * 1024 * 1024;

/// An invocation input over [`MAX_INPUT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the input is {0} bytes; the limit is {MAX_INPUT_BYTES}")]
pub struct InputTooLarge(pub usize);

/// Refuses an invocation input over [`MAX_INPUT_BYTES`].
pub fn check_input_len(len: usize) -> Result<(), InputTooLarge> {
    if len > MAX_INPUT_BYTES {
        return Err(InputTooLarge(len));
    }
    Ok(())
}
