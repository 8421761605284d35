//! The node's audit trail (docs/trust.md, docs/decisions/0005-audit-chain.md): `log.rs` writes
//! the hash-chained records, durable before the result they record
//! reaches the model; `ship.rs` sends them to SMS at least once;
//! `files.rs` is where they live in the state dir; [`verify_dir`] is
//! `spearlet audit verify`.

mod files;
mod log;
pub mod resume;
mod ship;
mod unreached;

use std::path::Path;

use spear_proto::audit::{ChainCheck, ChainProblem, Record};

pub use log::{AuditLog, OpenError, Unwritable, ROTATE_BYTES};
pub use ship::Shipper;

/// What [`verify_dir`] found.
#[derive(Debug)]
pub struct DirReport {
    pub node: String,
    pub records: u64,
    pub first_seq: Option<u64>,
    pub problem: Option<ChainProblem>,
}

/// Checks the chain of the records kept in `dir` (the node is the one
/// the oldest record names; every record must name it too).
pub fn verify_dir(dir: &Path) -> std::io::Result<DirReport> {
    let files = files::list(dir)?;
    let node = files
        .first()
        .and_then(|(_, path)| files::lines_from(path, 0).ok())
        .and_then(|lines| lines.into_iter().next())
        .and_then(|(line, _)| serde_json::from_str::<Record>(&line).ok())
        .map(|r| r.node)
        .unwrap_or_default();
    let mut check = ChainCheck::new(&node);
    for (first, path) in files {
        for (i, (line, _)) in files::lines_from(&path, 0)?.into_iter().enumerate() {
            let seq = first + i as u64;
            if let Err(problem) = check.push(seq, &line) {
                return Ok(DirReport {
                    node,
                    records: check.records,
                    first_seq: check.first_seq,
                    problem: Some(problem),
                });
            }
        }
    }
    Ok(DirReport {
        node,
        records: check.records,
        first_seq: check.first_seq,
        problem: None,
    })
}
