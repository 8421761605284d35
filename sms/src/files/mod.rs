//! The live `--mcp-dir`: a watcher that notices changes and a reconciler that
//! turns each changed file into one atomic registry change.

mod problems;
mod reconcile;
mod watcher;

pub use problems::FileProblems;
pub use reconcile::{file_source, plan_file, plan_removal, record_file, Reconciler};
pub use watcher::watch_dir;
