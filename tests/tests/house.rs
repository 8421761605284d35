//! The house rules, checked on the source itself: files do not import
//! each other in loops (scripts/circles.py, at most 3 circles), no library
//! code outside the guest SDK returns `Result<_, String>` (errors are
//! typed), and nothing cites a design text outside the repository.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf()
}

/// The crates' non-test Rust sources: `src/` of each library crate, each
/// cut at its first `#[cfg(test)]` (tests sit at the end of a file here),
/// without `tests.rs` files and `tests/` folders.
fn library_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for krate in [
        "common", "sandbox", "identity", "oauth", "proto", "sms", "spearlet",
    ] {
        let mut dirs = vec![repo().join(krate).join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name != "tests" {
                        dirs.push(path);
                    }
                } else if name.ends_with(".rs") && name != "tests.rs" {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
                    out.push((path, code));
                }
            }
        }
    }
    out
}

#[test]
fn files_import_each_other_in_at_most_three_circles() {
    let out = std::process::Command::new("python3")
        .arg(repo().join("scripts/circles.py"))
        .args(["--max", "3"])
        .arg(repo())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
}

#[test]
fn library_errors_are_typed_not_strings() {
    let mut found = Vec::new();
    for (path, code) in library_sources() {
        let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut rest = flat.as_str();
        while let Some(at) = rest.find("Result<") {
            let tail = &rest[at..];
            let end = tail.find(['{', ';']).unwrap_or(tail.len());
            let signature = &tail[..end];
            if signature.contains(", String>") || signature.contains(",String>") {
                found.push(format!(
                    "{}: {}",
                    path.display(),
                    &signature[..signature.len().min(80)]
                ));
            }
            rest = &tail[7..];
        }
    }
    assert!(
        found.is_empty(),
        "give these a thiserror type:\n{}",
        found.join("\n")
    );
}

#[test]
fn nothing_cites_a_design_text_outside_the_repository() {
    let mut found = Vec::new();
    for (path, code) in library_sources() {
        if code.contains("DESIGN §") || code.contains("DESIGN.md") {
            found.push(path.display().to_string());
        }
    }
    for page in std::fs::read_dir(repo().join("docs")).unwrap().flatten() {
        let path = page.path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains("DESIGN §") || text.contains("DESIGN.md") {
                found.push(path.display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "cite docs/ instead:\n{}",
        found.join("\n")
    );
}

/// Every `docs/…` page the code cites exists.
#[test]
fn the_pages_the_code_cites_exist() {
    let mut missing = Vec::new();
    for (path, code) in library_sources() {
        for (at, _) in code.match_indices("docs/") {
            let cited: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/-_.".contains(*c))
                .collect();
            let cited = cited.trim_end_matches('.');
            if cited.ends_with(".md") && !repo().join(cited).exists() {
                missing.push(format!("{}: {cited}", path.display()));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
