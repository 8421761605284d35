//! The audit log's files in the node's state dir: `audit/audit-<first
//! seq, 20 digits>.jsonl`, one record per line, a new file when one passes
//! its size. A file's name never changes, so a reader's place in one
//! (file, offset) stays good across rotation.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use spear_proto::audit::Record;

/// The files of `dir`, oldest first, with the first seq each names.
pub fn list(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let first = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("audit-"))
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(first) = first {
            files.push((first, path));
        }
    }
    files.sort();
    Ok(files)
}

/// The file whose records start at `first`.
pub fn path_of(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("audit-{first:020}.jsonl"))
}

/// The complete lines of `path` from `offset`: each line's text (no
/// newline) and the offset after it. A last line without its newline (a
/// write cut by a crash) is not returned.
pub fn lines_from(path: &Path, offset: u64) -> std::io::Result<Vec<(String, u64)>> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut reader = BufReader::new(file);
    let mut lines = Vec::new();
    let mut at = offset;
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line)?;
        if read == 0 || !line.ends_with('\n') {
            break;
        }
        at += read as u64;
        line.pop();
        lines.push((line, at));
    }
    Ok(lines)
}

/// Where the log ends: the last complete record of the newest file that
/// has one, and the newest file with its good length (a torn tail past
/// it is cut when the log reopens).
#[derive(Debug, Default)]
pub struct Tail {
    /// The last record's seq and hash (0 and empty: no record yet).
    pub seq: u64,
    pub hash: String,
    pub file: Option<(u64, u64)>,
}

/// The end of the log, reading only the end of the newest file when its
/// last record is readable (a start does not read 64 MiB); the whole file
/// otherwise.
pub fn tail(dir: &Path) -> std::io::Result<Tail> {
    let files = list(dir)?;
    if let Some((first, path)) = files.last() {
        if let Some((record, good_len)) = last_record(path)? {
            if record.seq >= *first {
                return Ok(Tail {
                    seq: record.seq,
                    hash: record.hash,
                    file: Some((*first, good_len)),
                });
            }
        }
    }
    let mut newest = None;
    for (first, path) in files.iter().rev() {
        let lines = lines_from(path, 0)?;
        let good_len = lines.last().map_or(0, |(_, end)| *end);
        newest.get_or_insert((*first, good_len));
        if let Some((line, _)) = lines.last() {
            // The seq is the line's place in its file; an unreadable last
            // record (edited by hand) leaves its hash unknown, so the next
            // record breaks the chain there and `verify` names it.
            let hash = serde_json::from_str::<Record>(line)
                .map(|r| r.hash)
                .unwrap_or_default();
            return Ok(Tail {
                seq: first + lines.len() as u64 - 1,
                hash,
                file: newest,
            });
        }
    }
    Ok(Tail {
        file: newest,
        ..Tail::default()
    })
}

/// The last complete line of `path` as a record, and the length of the
/// file up to its end; `None` when the end holds no readable record.
fn last_record(path: &Path) -> std::io::Result<Option<(Record, u64)>> {
    const END: u64 = 64 * 1024;
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(END);
    file.seek(SeekFrom::Start(start))?;
    let mut end = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut end)?;
    let Some(last_newline) = end.iter().rposition(|b| *b == b'\n') else {
        return Ok(None);
    };
    let line_start = match end[..last_newline].iter().rposition(|b| *b == b'\n') {
        Some(at) => at + 1,
        // The line may begin before what was read.
        None if start > 0 => return Ok(None),
        None => 0,
    };
    let line = &end[line_start..last_newline];
    Ok(serde_json::from_slice::<Record>(line)
        .ok()
        .map(|record| (record, start + last_newline as u64 + 1)))
}
