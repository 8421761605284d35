//! A server's timeouts with the node's defaults filled in: how long it may
//! take to start, to list, to answer a call, and how long a list is used.

use std::time::Duration;

use spear_proto::v1::ServerSpec;

/// The re-list bound when a server's file gives none.
pub const DEFAULT_RELIST_MS: u64 = 60_000;

/// Timeouts of one server, with the node's defaults filled in.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub startup: Duration,
    pub list_tools: Duration,
    /// A call's timeout; each progress notification restarts it.
    pub call: Duration,
    /// How long a call may run in all, progress or not.
    pub call_max: Duration,
    /// How long a tool list is offered before listing again, whether or
    /// not the server said it changed: a server that changes silently
    /// (or whose announcement is lost) is caught within this bound.
    pub relist: Duration,
}

impl Timeouts {
    /// The server's declared timeouts, or these defaults: a call may run
    /// ten times its timeout while it reports progress, at most an hour.
    pub fn for_spec(spec: &ServerSpec) -> Self {
        let t = spec.timeouts.unwrap_or_default();
        let pick = |ms: u32, default: u64| {
            Duration::from_millis(if ms == 0 { default } else { u64::from(ms) })
        };
        let call = pick(t.call_ms, 60_000);
        let call_max = if t.call_max_ms == 0 {
            (call * 10).min(Duration::from_secs(3600))
        } else {
            Duration::from_millis(u64::from(t.call_max_ms))
        };
        Self {
            startup: pick(t.startup_ms, 30_000),
            list_tools: pick(t.list_tools_ms, 10_000),
            call,
            call_max: call_max.max(call),
            relist: pick(t.relist_ms, DEFAULT_RELIST_MS),
        }
    }
}
