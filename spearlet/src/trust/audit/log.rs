//! The node's audit log: append-only, hash-chained, durable before the
//! result it records reaches the model. Entry point: [`AuditLog::open`].
//!
//! [`AuditLog::append`] numbers a record and hands it to the log's writer
//! thread, which costs the caller a lock and a channel send; the writer
//! seals records in order (each names the hash of the one before), writes
//! what has arrived as one batch, syncs the file once for the batch, and
//! then publishes the last seq that is on disk. [`AuditLog::durable`]
//! waits for that, so a tool loop appends as it goes and waits once
//! before its next model request (DESIGN §6.1). A file past its size is
//! closed and the next one starts (see `files.rs`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use spear_proto::audit::Record;
use tokio::sync::watch;
use tracing::error;

use super::files;

/// When the current file is closed and the next one starts.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// Records one batch writes and syncs at most.
const MAX_BATCH: usize = 4096;

/// Why the log cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log in {dir}: {cause}; check the state dir's permissions and free space")]
pub struct OpenError {
    dir: PathBuf,
    cause: std::io::Error,
}

/// The appending half, cloned into every run.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

struct Inner {
    node: String,
    dir: PathBuf,
    /// The next seq, taken with the send so records reach the writer in
    /// seq order.
    next: Mutex<(u64, mpsc::Sender<Record>)>,
    /// The last seq on disk.
    synced: watch::Receiver<u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl AuditLog {
    /// Opens (or starts) the log in `dir` for `node`, going on from its
    /// last complete record; a record cut by a crash was never
    /// acknowledged, and is cut off.
    pub fn open(dir: &Path, node: &str, rotate_bytes: u64) -> Result<AuditLog, OpenError> {
        let fail = |cause| OpenError {
            dir: dir.to_path_buf(),
            cause,
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        let tail = files::tail(dir).map_err(fail)?;
        let (first, len) = tail.file.unwrap_or((tail.seq + 1, 0));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(files::path_of(dir, first))
            .map_err(fail)?;
        file.set_len(len).map_err(fail)?;
        let (send, receive) = mpsc::channel();
        let (published, synced) = watch::channel(tail.seq);
        let writer = Writer {
            dir: dir.to_path_buf(),
            file,
            written: len,
            rotate_bytes,
            prev: tail.hash,
            published,
        };
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || writer.run(receive))
            .map_err(fail)?;
        Ok(AuditLog {
            inner: Arc::new(Inner {
                node: node.to_string(),
                dir: dir.to_path_buf(),
                next: Mutex::new((tail.seq + 1, send)),
                synced,
            }),
        })
    }

    /// Where the log's files are.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Adds `record` (its node, time and seq are set here); answers its
    /// seq, for [`AuditLog::durable`].
    pub fn append(&self, mut record: Record) -> u64 {
        record.node.clone_from(&self.inner.node);
        record.time_ms = now_ms();
        let mut next = self.inner.next.lock();
        let seq = next.0;
        record.seq = seq;
        next.0 += 1;
        if next.1.send(record).is_err() {
            error!("the audit writer has stopped; records are not being kept");
        }
        seq
    }

    /// The seq of the last record appended (0: none).
    pub fn last(&self) -> u64 {
        self.inner.next.lock().0 - 1
    }

    /// The last seq on disk.
    pub fn synced(&self) -> u64 {
        *self.inner.synced.borrow()
    }

    /// A receiver that changes whenever more records are on disk.
    pub fn watch_synced(&self) -> watch::Receiver<u64> {
        self.inner.synced.clone()
    }

    /// Waits until every record up to `seq` is on disk. Returns at once
    /// when the writer has stopped (it logged why).
    pub async fn durable(&self, seq: u64) {
        let mut synced = self.inner.synced.clone();
        let _ = synced.wait_for(|on_disk| *on_disk >= seq).await;
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    file: File,
    written: u64,
    rotate_bytes: u64,
    /// The last record's hash.
    prev: String,
    published: watch::Sender<u64>,
}

impl Writer {
    fn run(mut self, receive: mpsc::Receiver<Record>) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let mut text = String::new();
        // Ends when every AuditLog handle is gone.
        while let Ok(first) = receive.recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match receive.try_recv() {
                    Ok(record) => batch.push(record),
                    Err(_) => break,
                }
            }
            text.clear();
            let mut last = 0;
            for record in batch.iter_mut() {
                let line = record.seal(record.seq, &self.prev);
                self.prev = std::mem::take(&mut record.hash);
                text.push_str(&line);
                text.push('\n');
                last = record.seq;
            }
            let first_seq = batch[0].seq;
            batch.clear();
            if let Err(cause) = self.write(first_seq, text.as_bytes()) {
                error!(%cause, dir = %self.dir.display(), "cannot write the audit log; tool calls wait until it can");
                // Nothing is published: runs wait at their next model
                // request rather than go on unrecorded.
                continue;
            }
            self.published.send_replace(last);
        }
    }

    /// Writes and syncs `bytes` (records from `first_seq`), starting a new
    /// file first when the current one is full.
    fn write(&mut self, first_seq: u64, bytes: &[u8]) -> std::io::Result<()> {
        if self.written >= self.rotate_bytes {
            self.file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(files::path_of(&self.dir, first_seq))?;
            self.written = 0;
        }
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use spear_proto::audit::{ChainCheck, Outcome};

    use super::*;

    fn record(tool: &str) -> Record {
        Record {
            tool: tool.into(),
            outcome: Outcome::Run,
            ..Record::default()
        }
    }

    fn verify(dir: &Path) -> (u64, Result<(), String>) {
        let mut check = ChainCheck::new("n1");
        for (_, path) in files::list(dir).unwrap() {
            for (line, _) in files::lines_from(&path, 0).unwrap() {
                let seq = serde_json::from_str::<Record>(&line).map_or(0, |r| r.seq);
                if let Err(problem) = check.push(seq, &line) {
                    return (check.records, Err(problem.to_string()));
                }
            }
        }
        (check.records, Ok(()))
    }

    #[tokio::test]
    async fn records_chain_across_files_and_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "n1", 512).unwrap();
        // One batch each (a file rotates between batches).
        for i in 0..20 {
            let seq = log.append(record(&format!("tool_{i}")));
            log.durable(seq).await;
        }
        assert!(files::list(dir.path()).unwrap().len() > 2, "small files rotate");
        drop(log);
        let log = AuditLog::open(dir.path(), "n1", 512).unwrap();
        assert_eq!(log.last(), 20);
        let seq = log.append(record("after"));
        assert_eq!(seq, 21);
        log.durable(seq).await;
        assert_eq!(verify(dir.path()), (21, Ok(())));
    }

    #[tokio::test]
    async fn a_record_cut_by_a_crash_is_dropped_and_the_chain_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "n1", ROTATE_BYTES).unwrap();
        for _ in 0..3 {
            log.append(record("t"));
        }
        log.durable(3).await;
        drop(log);
        let (_, path) = files::list(dir.path()).unwrap().pop().unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"v":1,"node":"n1","seq":4,"#).unwrap();
        let log = AuditLog::open(dir.path(), "n1", ROTATE_BYTES).unwrap();
        let seq = log.append(record("t"));
        assert_eq!(seq, 4);
        log.durable(seq).await;
        assert_eq!(verify(dir.path()), (4, Ok(())));
    }

    #[tokio::test]
    async fn an_edited_record_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "n1", ROTATE_BYTES).unwrap();
        for i in 0..5 {
            log.append(record(&format!("tool_{i}")));
        }
        log.durable(5).await;
        let (_, path) = files::list(dir.path()).unwrap().pop().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("tool_2", "tool_x")).unwrap();
        assert_eq!(
            verify(dir.path()),
            (2, Err("record 3 was altered: its hash does not match its contents".into()))
        );
    }
}
