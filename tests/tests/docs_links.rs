//! The docs a newcomer follows point at pages that exist: every relative
//! Markdown link, and every `docs/<page>.md` named in text, in the README
//! and docs/, resolves to a file of the repository.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf()
}

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    let mut dirs = vec![repo().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages
}

/// The relative targets of `](target)` links in `text`, anchors cut off.
fn link_targets(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or("").trim().to_string())
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .filter(|t| !t.contains(' '))
        .collect()
}

/// Every `docs/<name>.md` named in `text`.
fn named_pages(text: &str) -> Vec<String> {
    text.match_indices("docs/")
        .filter_map(|(at, _)| {
            let rest = &text[at..];
            let end = rest.find(".md")?;
            let name = &rest[..end + 3];
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/-_.".contains(c))
                .then(|| name.to_string())
        })
        .collect()
}

#[test]
fn every_page_the_docs_point_at_exists() {
    let mut missing = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap_or(Path::new("."));
        for target in link_targets(&text) {
            if !dir.join(&target).exists() {
                missing.push(format!("{}: link to {target}", page.display()));
            }
        }
        for named in named_pages(&text) {
            if !repo().join(&named).exists() {
                missing.push(format!("{}: names {named}", page.display()));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
