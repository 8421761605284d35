//! Server declarations: parsing and validating the files of `--mcp-dir` and
//! admin requests into [`spear_proto::v1::ServerSpec`]s, with one clear
//! problem per mistake (file, JSON path, what to do).

mod auth;
mod fields;
mod ids;
mod parse;
mod problem;
mod scan;
mod suggest;
mod values;

#[cfg(test)]
mod tests;

pub use ids::{check_server_id, IdError, MAX_ID_LEN};
pub use parse::{parse_file, parse_server_json, MAX_FILE_BYTES};
pub use problem::Problem;
pub use scan::{
    scan_dir, scan_dir_since, validate_dir, DirScan, FileOutcome, ScannedFile, Skipped,
};
pub use spear_proto::patterns::{check_pattern, glob_match};
pub use spear_proto::refs::check_references;
