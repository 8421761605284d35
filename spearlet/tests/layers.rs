//! The node's modules form layers: each may use only the ones listed before
//! it, never one above (the runtime never names cchat, connections never
//! name the router, a policy never dials a server). A new module has to
//! take its place here, and an import against the order fails with the
//! file that made it.

use std::path::{Path, PathBuf};

/// Lowest first.
const LAYERS: &[&str] = &[
    "node_policy",
    "registry",
    "persist",
    "sms_link",
    "sync",
    "revocations",
    "env_refs",
    "http_client",
    "sandbox",
    "tool_index",
    "llm",
    "mcp",
    "sms_tokens",
    "quota",
    "trust",
    "connections",
    "tool_policy",
    "tools",
    "northbound",
    "wasm",
    "config",
    "cchat",
    "invoke",
    "heartbeat",
    "http_endpoint",
    "node",
    "cli",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src` belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let first = file.strip_prefix(src).unwrap().components().next().unwrap();
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// `crate::NAME` paths in `text`, comments included (a doc link to a
/// module above is a dependency in the reader's head too).
fn crate_paths(text: &str) -> Vec<String> {
    text.match_indices("crate::")
        .filter(|(at, _)| !text[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, _)| {
            text[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn no_module_uses_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(level) = LAYERS.iter().position(|l| *l == module) else {
            wrong.push(format!(
                "{}: module '{module}' has no layer; add it to LAYERS in spearlet/tests/layers.rs",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for used in crate_paths(&text) {
            if used == module {
                continue;
            }
            match LAYERS.iter().position(|l| *l == used) {
                Some(at) if at < level => {}
                Some(_) => wrong.push(format!(
                    "{}: '{module}' uses '{used}', which is above it",
                    file.display()
                )),
                None => wrong.push(format!(
                    "{}: '{module}' uses 'crate::{used}', which is no module of the layers",
                    file.display()
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_an_import_from_above() {
    assert_eq!(
        crate_paths("use crate::cchat::Sessions; // see crate::tools\nspear_crate::x"),
        vec!["cchat".to_string(), "tools".to_string()]
    );
}
