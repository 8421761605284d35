//! The node's audit log: append-only, hash-chained, durable before the
//! result it records reaches the model. Entry point: [`AuditLog::open`].
//!
//! [`AuditLog::append`] numbers a record and queues it, which costs the
//! caller a lock and a push: nothing on the tool-call path waits for the
//! disk or wakes another thread. The log's writer thread takes what is
//! queued when someone waits for it ([`AuditLog::durable`], which a tool
//! loop calls once before its next model request), when the queue is
//! long, or every [`FLUSH_EVERY`]; it seals the records in order (each
//! names the hash of the one before), writes them as one batch, syncs the
//! file once, and then publishes the last seq on disk (docs/decisions/0005-audit-chain.md). A
//! batch the disk refuses is kept and written again, so the chain never
//! skips. A file past its size is closed and the next one starts (see
//! `files.rs`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use spear_proto::audit::Record;
use tokio::sync::watch;
use tracing::error;

use super::files;

/// When the current file is closed and the next one starts.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// Records queued before the writer is woken without anyone waiting.
const WAKE_AT: usize = 1024;
/// How long a record may sit queued when nobody waits for it.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Why the log cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot open the audit log in {dir}: {cause}; check the state dir's permissions and free space"
)]
pub struct OpenError {
    dir: PathBuf,
    cause: std::io::Error,
}

/// The log cannot be written: nothing may run unrecorded, so a run that
/// waits for its records ends, and the node refuses new runs, until the
/// disk takes them again (the records stay queued, in order).
#[derive(Debug, Clone, thiserror::Error)]
#[error("this node cannot write its audit log in {dir} ({cause}); it runs nothing unrecorded, so it refuses runs until the log can be written (free space, or fix the state dir's permissions)")]
pub struct Unwritable {
    dir: PathBuf,
    cause: String,
}

/// Where a chain goes on from: the last seq and hash SMS holds (asked for
/// by `resume.rs` when the node's own log is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeFrom {
    pub seq: u64,
    pub hash: String,
}

/// The appending half, cloned into every run.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

/// Records numbered and waiting for the writer.
struct Queue {
    next: u64,
    records: Vec<Record>,
}

struct Inner {
    node: String,
    dir: PathBuf,
    queue: Arc<Mutex<Queue>>,
    /// Wakes the writer (someone waits, or the queue is long).
    wake: mpsc::Sender<()>,
    /// The last seq on disk.
    synced: watch::Receiver<u64>,
    /// Why the last write failed; `None` once one succeeds.
    failing: watch::Receiver<Option<String>>,
}

impl AuditLog {
    /// Opens (or starts) the log in `dir` for `node`, going on from its
    /// last complete record; a record cut by a crash was never
    /// acknowledged, and is cut off.
    pub fn open(dir: &Path, node: &str, rotate_bytes: u64) -> Result<AuditLog, OpenError> {
        Self::open_resuming(dir, node, rotate_bytes, None)
    }

    /// [`AuditLog::open`]; an empty log given `resume` numbers its first
    /// record after it and chains it to its hash (see `resume.rs`).
    pub fn open_resuming(
        dir: &Path,
        node: &str,
        rotate_bytes: u64,
        resume: Option<&ResumeFrom>,
    ) -> Result<AuditLog, OpenError> {
        let fail = |cause| OpenError {
            dir: dir.to_path_buf(),
            cause,
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        let mut tail = files::tail(dir).map_err(fail)?;
        if let (0, Some(from)) = (tail.seq, resume) {
            tail.seq = from.seq;
            tail.hash.clone_from(&from.hash);
            tail.file = None;
        }
        let (first, len) = tail.file.unwrap_or((tail.seq + 1, 0));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(files::path_of(dir, first))
            .map_err(fail)?;
        file.set_len(len).map_err(fail)?;
        let (wake, woken) = mpsc::channel();
        let (published, synced) = watch::channel(tail.seq);
        let (health, failing) = watch::channel(None);
        let queue = Arc::new(Mutex::new(Queue {
            next: tail.seq + 1,
            records: Vec::new(),
        }));
        let writer = Writer {
            dir: dir.to_path_buf(),
            queue: Arc::clone(&queue),
            file,
            written: len,
            rotate_bytes,
            prev: tail.hash,
            pending: String::new(),
            pending_first: 0,
            pending_last: 0,
            published,
            health,
        };
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || writer.run(woken))
            .map_err(fail)?;
        Ok(AuditLog {
            inner: Arc::new(Inner {
                node: node.to_string(),
                dir: dir.to_path_buf(),
                queue,
                wake,
                synced,
                failing,
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
        record.time_ms = spear_common::clock::now_ms();
        let mut queue = self.inner.queue.lock();
        let seq = queue.next;
        record.seq = seq;
        queue.next += 1;
        queue.records.push(record);
        if queue.records.len() == WAKE_AT {
            let _ = self.inner.wake.send(());
        }
        seq
    }

    /// The seq of the last record appended (0: none).
    pub fn last(&self) -> u64 {
        self.inner.queue.lock().next - 1
    }

    /// The last seq on disk.
    pub fn synced(&self) -> u64 {
        *self.inner.synced.borrow()
    }

    /// A receiver that changes whenever more records are on disk.
    pub fn watch_synced(&self) -> watch::Receiver<u64> {
        self.inner.synced.clone()
    }

    /// Why the log cannot be written now, if it cannot.
    pub fn unwritable(&self) -> Option<Unwritable> {
        let cause = self.inner.failing.borrow().clone()?;
        Some(Unwritable {
            dir: self.inner.dir.clone(),
            cause,
        })
    }

    /// Waits until every record up to `seq` is on disk, or the disk
    /// refuses them.
    pub async fn durable(&self, seq: u64) -> Result<(), Unwritable> {
        let mut synced = self.inner.synced.clone();
        if *synced.borrow() >= seq {
            return Ok(());
        }
        let stopped = || Unwritable {
            dir: self.inner.dir.clone(),
            cause: "its writer has stopped".into(),
        };
        if self.inner.wake.send(()).is_err() {
            error!("the audit writer has stopped; records are not being kept");
            return Err(stopped());
        }
        let mut failing = self.inner.failing.clone();
        failing.mark_unchanged();
        loop {
            tokio::select! {
                on_disk = synced.wait_for(|on_disk| *on_disk >= seq) => {
                    return on_disk.map(|_| ()).map_err(|_| stopped());
                }
                changed = failing.changed() => {
                    changed.map_err(|_| stopped())?;
                    if let Some(refused) = self.unwritable() {
                        return Err(refused);
                    }
                }
            }
        }
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    queue: Arc<Mutex<Queue>>,
    file: File,
    written: u64,
    rotate_bytes: u64,
    /// The last sealed record's hash.
    prev: String,
    /// Sealed lines not yet on disk (a write the disk refused is kept),
    /// and the seqs they span.
    pending: String,
    pending_first: u64,
    pending_last: u64,
    published: watch::Sender<u64>,
    /// Why the last write failed (`None`: it did not).
    health: watch::Sender<Option<String>>,
}

impl Writer {
    fn run(mut self, woken: mpsc::Receiver<()>) {
        loop {
            let open = match woken.recv_timeout(FLUSH_EVERY) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => true,
                // Every handle is gone: write what is left, and stop.
                Err(mpsc::RecvTimeoutError::Disconnected) => false,
            };
            while woken.try_recv().is_ok() {}
            self.seal_queued();
            if !self.pending.is_empty() {
                match self.write() {
                    Ok(()) => {
                        self.pending.clear();
                        // Healthy before published: whoever sees the
                        // records on disk sees the log writable.
                        self.health.send_if_modified(|h| h.take().is_some());
                        self.published.send_replace(self.pending_last);
                    }
                    Err(cause) => {
                        // Kept: written again on the next round. Runs
                        // waiting for it end, and new ones are refused.
                        error!(%cause, dir = %self.dir.display(), "cannot write the audit log; the node refuses runs until it can");
                        self.health.send_replace(Some(cause.to_string()));
                    }
                }
            }
            if !open {
                return;
            }
        }
    }

    /// Seals what is queued, in seq order, onto `pending`.
    fn seal_queued(&mut self) {
        let records = std::mem::take(&mut self.queue.lock().records);
        for mut record in records {
            if self.pending.is_empty() {
                self.pending_first = record.seq;
            }
            let line = record.seal(record.seq, &self.prev);
            self.prev = std::mem::take(&mut record.hash);
            self.pending.push_str(&line);
            self.pending.push('\n');
            self.pending_last = record.seq;
        }
    }

    /// Writes and syncs `pending`, starting a new file first when the
    /// current one is full.
    fn write(&mut self) -> std::io::Result<()> {
        if self.written >= self.rotate_bytes {
            // The new file replaces the full one only once the batch is
            // in it: a failed start is opened afresh on the retry.
            let mut next = OpenOptions::new()
                .create(true)
                .append(true)
                .open(files::path_of(&self.dir, self.pending_first))?;
            write_synced(&mut next, self.pending.as_bytes(), 0)?;
            self.file = next;
            self.written = self.pending.len() as u64;
            return Ok(());
        }
        write_synced(&mut self.file, self.pending.as_bytes(), self.written)?;
        self.written += self.pending.len() as u64;
        Ok(())
    }
}

/// Appends `bytes` to `file` (`len` long) and syncs it; on failure cuts
/// what part got through, so the retry does not write it twice.
fn write_synced(file: &mut File, bytes: &[u8], len: u64) -> std::io::Result<()> {
    let wrote = file.write_all(bytes).and_then(|()| file.sync_data());
    if let Err(cause) = wrote {
        let _ = file.set_len(len);
        return Err(cause);
    }
    Ok(())
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
            log.durable(seq).await.unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(
            files::list(dir.path()).unwrap().len() > 2,
            "small files rotate"
        );
        drop(log);
        let log = AuditLog::open(dir.path(), "n1", 512).unwrap();
        assert_eq!(log.last(), 20);
        let seq = log.append(record("after"));
        assert_eq!(seq, 21);
        log.durable(seq).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(verify(dir.path()), (21, Ok(())));
    }

    #[tokio::test]
    async fn a_record_cut_by_a_crash_is_dropped_and_the_chain_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "n1", ROTATE_BYTES).unwrap();
        for _ in 0..3 {
            log.append(record("t"));
        }
        log.durable(3).await.unwrap_or_else(|e| panic!("{e}"));
        drop(log);
        let (_, path) = files::list(dir.path()).unwrap().pop().unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"v":1,"node":"n1","seq":4,"#).unwrap();
        let log = AuditLog::open(dir.path(), "n1", ROTATE_BYTES).unwrap();
        let seq = log.append(record("t"));
        assert_eq!(seq, 4);
        log.durable(seq).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(verify(dir.path()), (4, Ok(())));
    }

    #[tokio::test]
    async fn an_edited_record_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "n1", ROTATE_BYTES).unwrap();
        for i in 0..5 {
            log.append(record(&format!("tool_{i}")));
        }
        log.durable(5).await.unwrap_or_else(|e| panic!("{e}"));
        let (_, path) = files::list(dir.path()).unwrap().pop().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("tool_2", "tool_x")).unwrap();
        assert_eq!(
            verify(dir.path()),
            (
                2,
                Err("record 3 was altered: its hash does not match its contents".into())
            )
        );
    }

    #[tokio::test]
    async fn a_disk_that_refuses_records_ends_the_wait_and_the_log_recovers() {
        let dir = tempfile::tempdir().unwrap();
        // One record per file, so the second file's path is known.
        let log = AuditLog::open(dir.path(), "n1", 1).unwrap();
        let first = log.append(record("first"));
        log.durable(first).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(log.unwritable().is_none());
        // The next file is a full disk.
        let next = files::path_of(dir.path(), 2);
        std::os::unix::fs::symlink("/dev/full", &next).unwrap();
        let second = log.append(record("second"));
        let refused = log.durable(second).await.unwrap_err();
        assert!(refused.to_string().contains("refuses runs"), "{refused}");
        assert!(log.unwritable().is_some());
        // Space again: the kept record is written, in order (a retry
        // already under way may still fail once).
        std::fs::remove_file(&next).unwrap();
        let mut written = log.durable(second).await;
        for _ in 0..10 {
            if written.is_ok() {
                break;
            }
            written = log.durable(second).await;
        }
        written.unwrap_or_else(|e| panic!("{e}"));
        assert!(log.unwritable().is_none());
        assert_eq!(verify(dir.path()), (2, Ok(())));
    }
}
