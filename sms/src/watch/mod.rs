//! The watch hub: SMS's in-memory view of the registry and the fan-out to
//! every watching node.
//!
//! One follower task reads committed changes from the store (`follow.rs`),
//! applies them to the hub's state and encodes each revision exactly once
//! (`encode.rs`) into a bounded ring of recent deltas. Every node stream
//! (`stream.rs`) keeps only a cursor into that ring: a slow stream falls behind
//! on its own and is sent a fresh snapshot when its cursor leaves the ring,
//! and nothing a stream does can block the follower or the other streams.
//! What the hub keeps is encoded once (`frames.rs`); a server scoped to
//! some nodes reaches the others as a stub.

mod encode;
mod follow;
mod frames;
mod hub;
mod stream;

pub use hub::{Hub, HubConfig, HubStats, ServersView};
pub use stream::WatchStream;
