//! What a server says about itself reaches the node's log, bounded: its
//! stderr lines (stdio servers) and its `notifications/message` (any
//! transport). Each line is cut to [`MAX_LINE`] bytes and at most
//! [`MAX_LINES_PER_SECOND`] are written per server; a flood is counted and
//! said once. Secrets the node substituted into the server's env, args,
//! URL or headers are redacted by the node's log writer.
//!
//! Log notifications are deprecated after 2025-11-25 (SEP-2577), but the
//! servers operators run today send them.
#![allow(deprecated)]

use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::Value;
use spear_common::text;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// Bytes of one server line written at most.
pub const MAX_LINE: usize = 2048;
/// Lines per second per server written at most.
pub const MAX_LINES_PER_SECOND: u32 = 50;

/// A per-second budget of lines from one server. Dropped lines are
/// counted and said when the window closes, or when the guard goes.
#[derive(Debug)]
pub struct FloodGuard {
    server_id: String,
    what: &'static str,
    window: Instant,
    logged: u32,
    dropped: u64,
}

impl FloodGuard {
    /// A guard for `server_id`'s `what` (`stderr`, `logging`).
    pub fn new(server_id: &str, what: &'static str) -> Self {
        FloodGuard {
            server_id: server_id.to_string(),
            what,
            window: Instant::now(),
            logged: 0,
            dropped: 0,
        }
    }

    /// Whether one more line may be written now.
    pub fn admit(&mut self) -> bool {
        if self.window.elapsed() >= Duration::from_secs(1) {
            self.say_dropped();
            (self.window, self.logged) = (Instant::now(), 0);
        }
        if self.logged >= MAX_LINES_PER_SECOND {
            self.dropped += 1;
            return false;
        }
        self.logged += 1;
        true
    }

    fn say_dropped(&mut self) {
        if self.dropped > 0 {
            warn!(
                server_id = self.server_id,
                dropped = self.dropped,
                "server {} is flooding; lines were dropped",
                self.what
            );
            self.dropped = 0;
        }
    }
}

impl Drop for FloodGuard {
    fn drop(&mut self) {
        self.say_dropped();
    }
}

/// The `notifications/message` of one session.
#[derive(Debug)]
pub struct ServerLog {
    guard: Mutex<FloodGuard>,
}

impl ServerLog {
    pub fn new(server_id: &str) -> Self {
        ServerLog {
            guard: Mutex::new(FloodGuard::new(server_id, "logging")),
        }
    }

    /// Writes one log notification at its level (a server's error is a
    /// warning for the node: the node itself is fine).
    pub fn message(&self, params: &LoggingMessageNotificationParam) {
        let mut guard = self.guard.lock();
        if !guard.admit() {
            return;
        }
        let server_id = guard.server_id.as_str();
        let data = match &params.data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let line = text::prefix(&data, MAX_LINE);
        let logger = params.logger.as_deref().unwrap_or("");
        match params.level {
            LoggingLevel::Debug => debug!(server_id, logger, "server log: {line}"),
            LoggingLevel::Info | LoggingLevel::Notice => {
                info!(server_id, logger, "server log: {line}")
            }
            _ => warn!(server_id, logger, level = ?params.level, "server log: {line}"),
        }
    }
}
