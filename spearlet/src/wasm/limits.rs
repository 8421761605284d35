//! What one guest may use, as the runtime enforces it: the shared bottom of
//! the runtime (`runtime.rs`) and the module checks (`resources.rs`).

use std::time::Duration;

/// The most linear memory one guest can have.
pub const MAX_GUEST_MEMORY: usize = (spear_proto::task::MAX_MEMORY_MB as usize) << 20;

/// Limits of one guest run, as the runtime enforces them.
#[derive(Debug, Clone, Copy)]
pub struct GuestLimits {
    pub memory_bytes: usize,
    pub table_elements: usize,
    /// Guest CPU over the whole run (guest code and the host's work for it;
    /// not waiting on the model or tools), never refilled.
    pub cpu: Duration,
    /// The whole run, host calls (the model, tools) included.
    pub wall: Duration,
    /// Captured stdout, and stderr, each.
    pub output_bytes: usize,
}

impl Default for GuestLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * 1024 * 1024,
            table_elements: 10_000,
            cpu: Duration::from_secs(5),
            wall: Duration::from_millis(spear_proto::defaults::DEFAULT_WALL_MS),
            output_bytes: 1024 * 1024,
        }
    }
}
