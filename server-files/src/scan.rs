//! Reading `--mcp-dir`: which files count, and what each declares.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};
use spear_proto::v1::{ServerSpec, VirtualServerSpec};

use super::official::COMPANION_SUFFIX;
use super::parse::{parse_declared, Companion, Declared, MAX_FILE_BYTES};
use super::problem::Problem;

/// What one file declares, or why it was rejected.
#[derive(Debug, Clone, PartialEq)]
pub enum FileOutcome {
    Servers(Vec<ServerSpec>),
    /// A virtual server (docs/virtual-servers.md).
    VirtualServer(VirtualServerSpec),
    Invalid(Vec<Problem>),
    /// The same bytes as a scan the caller already applied: not parsed
    /// again (a periodic rescan of 10,000 servers would otherwise parse
    /// and check them all every time).
    Unchanged,
}

/// One `*.json` file of the directory.
#[derive(Debug, Clone)]
pub struct ScannedFile {
    /// The file name inside the directory.
    pub name: String,
    pub outcome: FileOutcome,
    /// sha256 of the bytes read (or of the read error), to notice changes.
    pub digest: [u8; 32],
}

/// A directory entry ignored on purpose.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// The directory as read once.
#[derive(Debug, Clone, Default)]
pub struct DirScan {
    /// Sorted by name.
    pub files: Vec<ScannedFile>,
    pub skipped: Vec<Skipped>,
}

/// Reads every `*.json` directly in `dir` (no recursion). Hidden files and
/// editor temporaries are skipped; a symlink counts only if it resolves to a
/// regular file inside the directory. Fails only if `dir` cannot be listed.
pub fn scan_dir(dir: &Path) -> std::io::Result<DirScan> {
    scan_dir_since(dir, &|_: &str, _: &[u8; 32]| false)
}

/// [`scan_dir`], leaving [`FileOutcome::Unchanged`] the files `known`
/// says the caller holds with that digest already.
pub fn scan_dir_since(
    dir: &Path,
    known: &dyn Fn(&str, &[u8; 32]) -> bool,
) -> std::io::Result<DirScan> {
    let root = dir.canonicalize()?;
    let mut names: Vec<String> = Vec::new();
    let mut scan = DirScan::default();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".json") {
            continue;
        }
        if name.starts_with('.') || name.starts_with('#') {
            scan.skipped.push(Skipped {
                name,
                reason: "hidden or editor temporary file".into(),
            });
            continue;
        }
        names.push(name);
    }
    names.sort();
    // A companion (`X.spear.json`) is read with its server.json (`X.json`),
    // not on its own.
    let (companions, names): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|n| n.ends_with(COMPANION_SUFFIX));
    for companion in &companions {
        let main = format!("{}.json", companion.trim_end_matches(COMPANION_SUFFIX));
        if names.contains(&main) {
            scan.skipped.push(Skipped {
                name: companion.clone(),
                reason: format!("Spear's settings for {main}, read with it"),
            });
        } else {
            let message = format!("a companion file holds Spear's settings for a registry server.json beside it, and {main} is not here; add it or remove this file");
            scan.files.push(ScannedFile {
                name: companion.clone(),
                digest: Sha256::digest(message.as_bytes()).into(),
                outcome: FileOutcome::Invalid(vec![Problem {
                    file: companion.clone(),
                    path: String::new(),
                    message,
                }]),
            });
        }
    }
    for name in names {
        let companion = format!("{}{COMPANION_SUFFIX}", name.trim_end_matches(".json"));
        let companion = companions.contains(&companion).then_some(companion);
        match read_file(&root, dir, &name, companion.as_deref(), known) {
            Entry::File(outcome, digest) => scan.files.push(ScannedFile {
                name,
                outcome,
                digest,
            }),
            Entry::Skip(reason) => scan.skipped.push(Skipped { name, reason }),
        }
    }
    scan.files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(scan)
}

enum Entry {
    File(FileOutcome, [u8; 32]),
    Skip(String),
}

/// Reads file `name` of `dir`, with its companion when it has one (the
/// digest covers both: a changed companion is a changed server).
fn read_file(
    root: &Path,
    dir: &Path,
    name: &str,
    companion: Option<&str>,
    known: &dyn Fn(&str, &[u8; 32]) -> bool,
) -> Entry {
    let (bytes, digest) = match read_bytes(root, &dir.join(name), name) {
        Ok(read) => read,
        Err(entry) => return entry,
    };
    let companion = match companion {
        None => None,
        Some(other) => match read_bytes(root, &dir.join(other), other) {
            Ok((bytes, _)) => Some((other, bytes)),
            Err(entry) => return entry,
        },
    };
    let digest = match &companion {
        None => digest,
        Some((_, extra)) => Sha256::new()
            .chain_update(&bytes)
            .chain_update([0u8])
            .chain_update(extra)
            .finalize()
            .into(),
    };
    if known(name, &digest) {
        return Entry::File(FileOutcome::Unchanged, digest);
    }
    let companion = companion.as_ref().map(|(name, bytes)| Companion {
        name,
        bytes: bytes.as_slice(),
    });
    let outcome = match parse_declared(name, &bytes, companion) {
        Ok(Declared::Servers(specs)) => FileOutcome::Servers(specs),
        Ok(Declared::Virtual(spec)) => FileOutcome::VirtualServer(spec),
        Err(problems) => FileOutcome::Invalid(problems),
    };
    Entry::File(outcome, digest)
}

/// One file's bytes and their digest, or the entry saying why not.
fn read_bytes(root: &Path, path: &Path, name: &str) -> Result<(Vec<u8>, [u8; 32]), Entry> {
    let invalid = |message: String| {
        let digest: [u8; 32] = Sha256::digest(message.as_bytes()).into();
        Entry::File(
            FileOutcome::Invalid(vec![Problem {
                file: name.to_string(),
                path: String::new(),
                message,
            }]),
            digest,
        )
    };
    let link = std::fs::symlink_metadata(path)
        .map_err(|e| invalid(format!("cannot read the file: {e}")))?;
    if link.file_type().is_symlink() {
        match path.canonicalize() {
            Err(_) => {
                return Err(invalid(
                    "is a symlink to nothing (dangling); fix or remove the link".into(),
                ))
            }
            Ok(target) if !target.starts_with(root) => {
                return Err(invalid(
                    "is a symlink pointing outside the MCP directory; copy the file in instead"
                        .into(),
                ))
            }
            Ok(_) => {}
        }
    }
    let meta =
        std::fs::metadata(path).map_err(|e| invalid(format!("cannot read the file: {e}")))?;
    if meta.is_dir() {
        return Err(Entry::Skip(
            "a directory (subdirectories are not read)".into(),
        ));
    }
    if !meta.is_file() {
        return Err(Entry::Skip("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(invalid(format!(
            "file is {} bytes; the limit is {MAX_FILE_BYTES}; split it into several files",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes));
    if let Err(e) = read {
        return Err(invalid(format!("cannot read the file: {e}")));
    }
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    Ok((bytes, digest))
}

/// `sms validate`: every per-file problem plus ids declared by two files (the
/// later file, by name, is the one reported, naming both).
pub fn validate_dir(dir: &Path) -> std::io::Result<(DirScan, Vec<Problem>)> {
    let scan = scan_dir(dir)?;
    let mut problems = Vec::new();
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    let mut virtual_owners: BTreeMap<&str, &str> = BTreeMap::new();
    for file in &scan.files {
        match &file.outcome {
            // A whole scan never leaves a file unparsed.
            FileOutcome::Unchanged => {}
            FileOutcome::Invalid(list) => problems.extend(list.iter().cloned()),
            FileOutcome::VirtualServer(spec) => match virtual_owners.get(spec.name.as_str()) {
                Some(owner) => problems.push(Problem {
                    file: file.name.clone(),
                    path: String::new(),
                    message: format!(
                        "virtual server '{}' is already declared in {owner}; names must be unique across the directory, so rename one of them",
                        spec.name
                    ),
                }),
                None => {
                    virtual_owners.insert(&spec.name, &file.name);
                }
            },
            FileOutcome::Servers(specs) => {
                for spec in specs {
                    match owners.get(spec.id.as_str()) {
                        Some(owner) => problems.push(Problem {
                            file: file.name.clone(),
                            path: String::new(),
                            message: format!(
                                "server id '{}' is already declared in {owner}; ids must be unique across the directory, so rename one of them",
                                spec.id
                            ),
                        }),
                        None => {
                            owners.insert(&spec.id, &file.name);
                        }
                    }
                }
            }
        }
    }
    Ok((scan, problems))
}
