//! The world's `log`: a guest's lines in the node's log, under the run's
//! span (task, invocation), escaped, each at most [`MAX_LINE`] bytes, and
//! at most [`MAX_LINES`] a run, so a guest cannot flood the node's log;
//! past that its lines are dropped, which the log says once.

use super::bindings::spear::agent::log::{Host, Level};
use super::ComponentChat;

/// Longest line kept of one `log.write`.
const MAX_LINE: usize = 4096;
/// Lines a run may write.
pub const MAX_LINES: u32 = 1000;

impl Host for ComponentChat {
    async fn write(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let logged = &mut self.host.logged;
        *logged = logged.saturating_add(1);
        if *logged > MAX_LINES {
            return Ok(());
        }
        let line = spear_common::text::printable(spear_common::text::prefix(&message, MAX_LINE));
        match level {
            Level::Debug => tracing::debug!(guest = %line),
            Level::Info => tracing::info!(guest = %line),
            Level::Warn => tracing::warn!(guest = %line),
            Level::Error => tracing::error!(guest = %line),
        }
        if *logged == MAX_LINES {
            tracing::warn!(
                "the guest wrote {MAX_LINES} log lines; the rest of this run's are dropped"
            );
        }
        Ok(())
    }
}
