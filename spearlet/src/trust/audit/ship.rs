//! Ships the node's audit records to SMS, at least once. Entry point:
//! [`Shipper::spawn`].
//!
//! The shipper reads records from the log's files (only those on disk),
//! sends them in batches, and moves on once SMS has answered; its place
//! is kept in `audit/shipped`, written after each answer, so a crash
//! between an answer and that write sends a batch again, which SMS keeps
//! once (it de-duplicates by node and seq). Shipped files past the
//! newest [`KEEP_FILES`] are removed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spear_common::backoff::Backoff;
use spear_proto::v1::{AuditLine, ShipAuditRequest};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::files;
use super::log::AuditLog;
use super::unreached::Unreached;
use crate::sms_link::SmsLink;

/// Records one shipment carries at most.
const BATCH: usize = 1000;
/// How long shipping fails before the node says so.
const SAY_FAILING_AFTER: Duration = Duration::from_secs(10);
/// Shipped files kept on the node beyond the one being written.
pub const KEEP_FILES: usize = 8;

/// The shipper's place: the next record to send is in file `file`
/// (its first seq) at `offset`, and is record `next`.
#[derive(Debug, Clone, Copy)]
struct Place {
    file: u64,
    offset: u64,
    next: u64,
}

pub struct Shipper {
    log: AuditLog,
    sms: SmsLink,
    node_id: String,
}

impl Shipper {
    pub fn spawn(log: AuditLog, sms: SmsLink, node_id: String) -> JoinHandle<()> {
        tokio::spawn(Shipper { log, sms, node_id }.run())
    }

    fn cursor_path(&self) -> PathBuf {
        self.log.dir().join("shipped")
    }

    async fn run(self) {
        let shipped: u64 = std::fs::read_to_string(self.cursor_path())
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let mut place = find(self.log.dir(), shipped + 1);
        let mut synced = self.log.watch_synced();
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
        // Said once when shipping has failed for a while (not at every
        // start, before the node reaches SMS), and once when it is back.
        let mut failing_since: Option<std::time::Instant> = None;
        let mut warned = false;
        loop {
            let on_disk = *synced.borrow_and_update();
            if place.next <= on_disk {
                match self.ship_from(place, on_disk).await {
                    Ok(moved) => {
                        if std::mem::take(&mut warned) {
                            info!(through = moved.next - 1, "audit records reach SMS again");
                        }
                        failing_since = None;
                        backoff.reset();
                        place = moved;
                        continue;
                    }
                    Err(why) => {
                        let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                        if !warned && since.elapsed() >= SAY_FAILING_AFTER {
                            warned = true;
                            warn!(%why, "audit records are not reaching SMS; they wait in the state dir and are sent when it answers");
                        } else {
                            debug!(%why, "audit records not shipped yet; trying again");
                        }
                        tokio::time::sleep(backoff.next_delay()).await;
                        continue;
                    }
                }
            }
            if synced.changed().await.is_err() {
                return;
            }
        }
    }

    /// Sends one batch from `place` (records up to `on_disk`); the place
    /// after it.
    async fn ship_from(&self, place: Place, on_disk: u64) -> Result<Place, Unreached> {
        let dir = self.log.dir();
        let files = files::list(dir)?;
        let path = files::path_of(dir, place.file);
        let lines = files::lines_from(&path, place.offset)?;
        let mut records = Vec::new();
        let mut moved = place;
        for (json, end) in lines.into_iter().take(BATCH) {
            if moved.next > on_disk {
                break;
            }
            records.push(AuditLine {
                seq: moved.next,
                json,
            });
            moved.offset = end;
            moved.next += 1;
        }
        if records.is_empty() {
            // The end of this file: on to the next one, if there is one.
            return match files.iter().find(|(first, _)| *first > place.file) {
                Some((first, _)) => Ok(Place {
                    file: *first,
                    offset: 0,
                    next: place.next,
                }),
                None => Err(Unreached::NothingPast),
            };
        }
        let mut client = self.sms.audit()?;
        let sent = records.len();
        client
            .ship_audit(ShipAuditRequest {
                node_id: self.node_id.clone(),
                records,
            })
            .await?;
        debug!(sent, through = moved.next - 1, "audit records shipped");
        let cursor = (moved.next - 1).to_string();
        if let Err(cause) = crate::persist::write_atomic(&self.cursor_path(), cursor.as_bytes()) {
            warn!(%cause, "cannot keep the audit shipper's place; records may be sent again after a restart");
        }
        retire(&files, moved.file);
        Ok(moved)
    }
}

/// The place of record `next` in the log's files (the oldest record
/// kept, when `next` is older than that).
fn find(dir: &Path, next: u64) -> Place {
    let files = files::list(dir).unwrap_or_default();
    let Some((first, path)) = files.iter().rev().find(|(first, _)| *first <= next) else {
        let first = files.first().map_or(next, |(first, _)| *first);
        return Place {
            file: first,
            offset: 0,
            next: first,
        };
    };
    let lines = files::lines_from(path, 0).unwrap_or_default();
    // Records before `next` in this file; all of them if it has fewer.
    let skip = ((next - first) as usize).min(lines.len());
    Place {
        file: *first,
        offset: skip.checked_sub(1).map_or(0, |i| lines[i].1),
        next: first + skip as u64,
    }
}

/// Removes shipped files beyond the newest [`KEEP_FILES`] before `shipping`.
fn retire(files: &[(u64, PathBuf)], shipping: u64) {
    let done: Vec<&(u64, PathBuf)> = files
        .iter()
        .filter(|(first, _)| *first < shipping)
        .collect();
    let excess = done.len().saturating_sub(KEEP_FILES);
    for (_, path) in done.into_iter().take(excess) {
        if let Err(cause) = std::fs::remove_file(path) {
            warn!(%cause, path = %path.display(), "cannot remove a shipped audit file");
        }
    }
}
