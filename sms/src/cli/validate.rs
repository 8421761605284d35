//! `sms validate DIR`: the directory rules, offline, and a note for every
//! literal value where a secret usually goes, saying what SMS does with it.

use std::collections::BTreeSet;
use std::path::Path;

use spear_common::text::printable;
use spear_common::{safe_eprintln, safe_println};
use spear_proto::v1::ServerSpec;

use crate::registry::{validate_dir, FileOutcome, ScannedFile};

/// Prints one line per problem; returns 0 when valid, 1 when not, 2 when the
/// directory cannot be read.
pub fn run(dir: &Path) -> i32 {
    match validate_dir(dir) {
        Err(error) => {
            safe_eprintln!("sms validate: cannot read {}: {error}", dir.display());
            2
        }
        Ok((scan, problems)) => {
            for skipped in &scan.skipped {
                safe_println!("skipped {}: {}", skipped.name, skipped.reason);
            }
            for problem in &problems {
                safe_println!("{problem}");
            }
            for file in &scan.files {
                if let FileOutcome::Servers(specs) = &file.outcome {
                    let shared = is_shared_shape(&dir.join(&file.name));
                    for spec in specs {
                        for warning in literal_secrets(&file.name, shared, spec) {
                            safe_println!("{warning}");
                        }
                        if let Some(note) = missing_command(&file.name, spec) {
                            safe_println!("{note}");
                        }
                        // A registry server.json: the exact argv nodes run.
                        if spec.registry.is_some() && !spec.command.is_empty() {
                            safe_println!(
                                "{}: server '{}' runs: {}",
                                printable(&file.name),
                                spec.id,
                                printable(&spec.command_line())
                            );
                        }
                    }
                }
            }
            for note in offers_elsewhere(&scan.files) {
                safe_println!("{note}");
            }
            if problems.is_empty() {
                let servers: usize = scan
                    .files
                    .iter()
                    .map(|f| match &f.outcome {
                        FileOutcome::Servers(s) => s.len(),
                        _ => 0,
                    })
                    .sum();
                let virtual_servers = scan
                    .files
                    .iter()
                    .filter(|f| matches!(f.outcome, FileOutcome::VirtualServer(_)))
                    .count();
                safe_println!(
                    "ok: {} files, {servers} servers, {virtual_servers} virtual servers",
                    scan.files.len()
                );
                0
            } else {
                1
            }
        }
    }
}

/// A note for each server a virtual server offers that no file of the
/// directory declares: not an error (it may come from the admin API), but
/// until it is registered the virtual server offers none of its tools.
fn offers_elsewhere(files: &[ScannedFile]) -> Vec<String> {
    let declared: BTreeSet<&str> = files
        .iter()
        .filter_map(|f| match &f.outcome {
            FileOutcome::Servers(specs) => Some(specs.iter().map(|s| s.id.as_str())),
            _ => None,
        })
        .flatten()
        .collect();
    let mut notes = Vec::new();
    for file in files {
        let FileOutcome::VirtualServer(spec) = &file.outcome else {
            continue;
        };
        for offer in spec
            .offers
            .iter()
            .filter(|o| !declared.contains(o.server_id.as_str()))
        {
            notes.push(format!(
                "{}: virtual server '{}' offers server '{}', which no file here declares; it offers none of its tools until the server is registered (a file, or sms apply)",
                printable(&file.name),
                spec.name,
                offer.server_id
            ));
        }
    }
    notes
}

/// A note when a stdio server's command is not on this machine: a path
/// that does not exist, or a name no directory of `PATH` holds. Not an
/// error (nodes run it, and may have what this machine lacks), but the
/// most common reason a server never starts.
fn missing_command(file: &str, spec: &ServerSpec) -> Option<String> {
    let command = spec.command.as_str();
    if command.is_empty() || command.contains("${") {
        return None;
    }
    let found = if command.contains('/') {
        Path::new(command).exists()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(command).is_file()))
    };
    (!found).then(|| {
        format!(
            "{}: server '{}': its command {} is not on this machine; every node the server is for must have it (nodes run it, not SMS)",
            printable(file),
            printable(&spec.id),
            printable(command)
        )
    })
}

/// Whether the file uses the shared `{"mcpServers": {...}}` shape (for the
/// JSON paths of warnings).
fn is_shared_shape(path: &Path) -> bool {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|json| json.get("mcpServers").is_some())
}

/// One note per `env` or `headers` value written literally instead of as a
/// `${NAME}` reference: SMS seals it (the registry carries it sealed, and
/// SMS opens it only for the nodes the server is for; an SMS on etcd needs
/// `--oauth-key-file` for that), but it still sits in the file and in
/// SMS's hands. The value itself is never printed.
fn literal_secrets(file: &str, shared: bool, spec: &ServerSpec) -> Vec<String> {
    let at = |section: &str, key: &str| {
        if shared {
            format!("$.mcpServers.{}.{section}.{key}", spec.id)
        } else {
            format!("$.{section}.{key}")
        }
    };
    let literal = |value: &str| spear_proto::refs::is_literal(value);
    let mut out = Vec::new();
    let mut env: Vec<_> = spec.env.iter().filter(|(_, v)| literal(v)).collect();
    env.sort();
    for (key, _) in env {
        out.push(format!(
            "sealed {file} {}: a literal value, which SMS seals and opens only for the nodes the server is for; to keep it off SMS as well, write \"${{{key}}}\" and set {key} on the nodes (their policy.env must allow it)",
            at("env", key)
        ));
    }
    let mut headers: Vec<_> = spec.headers.iter().filter(|(_, v)| literal(v)).collect();
    headers.sort();
    for (name, _) in headers {
        let var = name.to_ascii_uppercase().replace('-', "_");
        out.push(format!(
            "sealed {file} {}: a literal value, which SMS seals and opens only for the nodes the server is for; to keep it off SMS as well, write it with a reference such as \"${{{var}}}\" and set {var} on the nodes (their policy.env must allow it)",
            at("headers", name)
        ));
    }
    out
}
