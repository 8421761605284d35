//! Server declarations: parsing and validating the files of `--mcp-dir` and
//! admin requests into [`spear_proto::v1::ServerSpec`]s (four shapes: the
//! native one, `mcpServers`, `servers`, and the official registry's
//! `server.json`, `official.rs`), with one clear
//! problem per mistake (file, JSON path, what to do). Entry points:
//! [`scan_dir`] for a directory, [`parse_file`] for one file's bytes.
//!
//! A crate of its own because two programs read these files: SMS, which
//! serves what they declare to the fleet, and `spearlet guest run`, which
//! runs one agent against them with no SMS at all.

mod auth;
mod fields;
mod ids;
mod official;
mod parse;
mod problem;
mod quota;
mod sandbox;
mod scan;
mod values;
pub mod virtual_server;

#[cfg(test)]
mod auth_tests;
#[cfg(test)]
mod server_json_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod virtual_server_tests;

pub use ids::{check_server_id, IdError, MAX_ID_LEN};
pub use official::{id_from_name, COMPANION_SUFFIX, DEFAULT_PIN};
pub use parse::{
    parse_declared, parse_file, parse_file_with, parse_server_json, Companion, Declared,
    MAX_FILE_BYTES,
};
pub use problem::Problem;
pub use scan::{
    scan_dir, scan_dir_since, validate_dir, DirScan, FileOutcome, ScannedFile, Skipped,
};
pub use spear_proto::patterns::{check_pattern, glob_match};
pub use spear_proto::refs::check_references;
