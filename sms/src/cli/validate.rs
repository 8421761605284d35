//! `sms validate DIR`: the directory rules, offline.

use std::path::Path;

use crate::registry::validate_dir;

/// Prints one line per problem; returns 0 when valid, 1 when not, 2 when the
/// directory cannot be read.
pub fn run(dir: &Path) -> i32 {
    match validate_dir(dir) {
        Err(error) => {
            eprintln!("sms validate: cannot read {}: {error}", dir.display());
            2
        }
        Ok((scan, problems)) => {
            for skipped in &scan.skipped {
                println!("skipped {}: {}", skipped.name, skipped.reason);
            }
            for problem in &problems {
                println!("{problem}");
            }
            if problems.is_empty() {
                let servers: usize = scan
                    .files
                    .iter()
                    .map(|f| match &f.outcome {
                        crate::registry::FileOutcome::Servers(s) => s.len(),
                        crate::registry::FileOutcome::Invalid(_) => 0,
                    })
                    .sum();
                println!("ok: {} files, {servers} servers", scan.files.len());
                0
            } else {
                1
            }
        }
    }
}
