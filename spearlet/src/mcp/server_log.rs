//! What a server makes the node write in its log, bounded per server: its
//! stderr lines (stdio servers), its `notifications/message` (any
//! transport), and the node's own line about each request the server
//! sends (an elicitation answered, a request refused). Each line is cut to
//! [`MAX_LINE`] bytes and at most [`MAX_LINES_PER_SECOND`] of each kind
//! are written per server; a flood is counted and said once. Refusals of
//! a server's requests past their bound are said once a minute. Secrets
//! the node substituted into the server's env, args, URL or headers are
//! redacted by the node's log writer. rmcp's own line per message is
//! below the node's log level (`spear_common::process`).
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

/// A budget of lines from one server per window (a second, unless
/// [`FloodGuard::per`] says). Dropped lines are counted and said when the
/// window closes, or when the guard goes.
#[derive(Debug)]
pub struct FloodGuard {
    server_id: String,
    what: &'static str,
    period: Duration,
    budget: u32,
    window: Instant,
    logged: u32,
    dropped: u64,
}

impl FloodGuard {
    /// A guard for `server_id`'s `what` (`stderr`, `logging`): at most
    /// [`MAX_LINES_PER_SECOND`].
    pub fn new(server_id: &str, what: &'static str) -> Self {
        Self::per(
            server_id,
            what,
            Duration::from_secs(1),
            MAX_LINES_PER_SECOND,
        )
    }

    /// A guard of `budget` lines per `period`.
    pub fn per(server_id: &str, what: &'static str, period: Duration, budget: u32) -> Self {
        FloodGuard {
            server_id: server_id.to_string(),
            what,
            period,
            budget,
            window: Instant::now(),
            logged: 0,
            dropped: 0,
        }
    }

    /// The server this guard is for.
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// Whether one more line may be written now.
    pub fn admit(&mut self) -> bool {
        if self.window.elapsed() >= self.period {
            self.say_dropped();
            (self.window, self.logged) = (Instant::now(), 0);
        }
        if self.logged >= self.budget {
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

/// What one session writes in the node's log for its server: its
/// `notifications/message`, a line per request it sends, and refusals.
#[derive(Debug)]
pub struct ServerLog {
    guard: Mutex<FloodGuard>,
    requests: Mutex<FloodGuard>,
    refusals: Mutex<FloodGuard>,
}

impl ServerLog {
    pub fn new(server_id: &str) -> Self {
        ServerLog {
            guard: Mutex::new(FloodGuard::new(server_id, "logging")),
            requests: Mutex::new(FloodGuard::new(server_id, "requests")),
            refusals: Mutex::new(FloodGuard::per(
                server_id,
                "refused requests",
                Duration::from_secs(60),
                1,
            )),
        }
    }

    /// Writes the node's line about one request the server sent (`say`
    /// gets the server's id), unless the server is flooding.
    pub fn request(&self, say: impl FnOnce(&str)) {
        let mut guard = self.requests.lock();
        if guard.admit() {
            say(guard.server_id());
        }
    }

    /// Writes a refusal (`say` gets the server's id) at most once a minute;
    /// the others are counted in the next minute's line.
    pub fn refusal(&self, say: impl FnOnce(&str)) {
        let mut guard = self.refusals.lock();
        if guard.admit() {
            say(guard.server_id());
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
