//! Which host directories tasks may be granted, and which writable.
//!
//! Paths are compared after resolving symlinks, so a link inside an
//! allowed directory cannot reach outside it. The state dir, `/proc`,
//! `/sys` and `/dev` (and any directory containing one of them, such as
//! `/`) are never grantable.
//!
//! A granted directory is opened when it is granted and held by that
//! descriptor until the run ends: the guest gets the directory that was
//! checked, even if its path is swapped for a symlink while the run waits
//! for a slot or its module compiles.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::PolicyError;

const NEVER: [&str; 3] = ["/proc", "/sys", "/dev"];

/// One `[[policy.dirs]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirRule {
    pub path: String,
    #[serde(default)]
    pub writable: bool,
}

/// A directory a task may have, resolved and open.
#[derive(Debug, Clone)]
pub struct GrantedDir {
    /// The resolved host path, as checked (for messages).
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
    /// The directory itself, opened when granted.
    handle: Arc<std::fs::File>,
}

impl PartialEq for GrantedDir {
    fn eq(&self, other: &Self) -> bool {
        (&self.host, &self.guest, self.writable) == (&other.host, &other.guest, other.writable)
    }
}

impl Eq for GrantedDir {}

impl GrantedDir {
    /// A path that opens exactly the directory granted, whatever has
    /// become of `host` since: its descriptor's entry in `/proc/self/fd`.
    pub fn open_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.handle.as_raw_fd()))
    }
}

/// Opens the checked path `path` as a directory, not following a symlink
/// put in its place, and confirms the descriptor is that very path (an
/// earlier component swapped in between would show in its real path).
fn open_checked(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    if real != path {
        return Err(std::io::Error::other(format!(
            "it changed while being opened (now {})",
            real.display()
        )));
    }
    Ok(file)
}

/// The allowed directories, resolved, and the ones never allowed.
#[derive(Debug, Clone)]
pub struct DirPolicy {
    allowed: Vec<(PathBuf, bool)>,
    never: Vec<PathBuf>,
}

/// `a` is `b` or inside it, or contains it.
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

impl DirPolicy {
    pub fn build(rules: &[DirRule], state_dir: &Path) -> Result<DirPolicy, PolicyError> {
        let mut policy = DirPolicy::none(state_dir);
        for (i, rule) in rules.iter().enumerate() {
            let error = |why: String| PolicyError {
                setting: format!("dirs[{i}]"),
                why,
            };
            if !rule.path.starts_with('/') {
                return Err(error(format!("'{}' is not an absolute path", rule.path)));
            }
            let path = resolve(Path::new(&rule.path))
                .map_err(|e| error(format!("cannot resolve '{}': {e}", rule.path)))?;
            if let Some(never) = policy.forbidden(&path) {
                return Err(error(format!(
                    "'{}' overlaps {}, which is never grantable",
                    rule.path,
                    never.display()
                )));
            }
            policy.allowed.push((path, rule.writable));
        }
        Ok(policy)
    }

    /// No directory at all.
    pub fn none(state_dir: &Path) -> DirPolicy {
        let state = resolve(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
        let mut never: Vec<PathBuf> = NEVER.iter().map(PathBuf::from).collect();
        never.push(state);
        DirPolicy {
            allowed: Vec::new(),
            never,
        }
    }

    /// Whether `path` (resolved) overlaps a directory never granted.
    pub fn is_never_grantable(&self, path: &Path) -> bool {
        self.forbidden(path).is_some()
    }

    fn forbidden(&self, path: &Path) -> Option<&PathBuf> {
        if path == Path::new("/") {
            return self.never.first();
        }
        self.never.iter().find(|never| overlaps(path, never))
    }

    /// Checks a task's grant of `host` (at `guest`, writable or not); `key`
    /// names it in the refusal.
    pub fn grant(
        &self,
        key: &str,
        host: &str,
        guest: &str,
        writable: bool,
    ) -> Result<GrantedDir, DirRefused> {
        let (key, host) = (key.to_string(), host.to_string());
        let path = match resolve(Path::new(&host)) {
            Ok(path) => path,
            Err(e) => {
                return Err(DirRefused::Unreadable {
                    key,
                    host,
                    cause: e.to_string(),
                })
            }
        };
        if let Some(never) = self.forbidden(&path) {
            let never = never.display().to_string();
            return Err(DirRefused::Never { key, host, never });
        }
        let Some((_, rule_writable)) = self
            .allowed
            .iter()
            .filter(|(allowed, _)| path.starts_with(allowed))
            .max_by_key(|(allowed, _)| allowed.as_os_str().len())
        else {
            return Err(DirRefused::NotAllowed { key, host });
        };
        if writable && !rule_writable {
            return Err(DirRefused::ReadOnly { key, host });
        }
        let handle = match open_checked(&path) {
            Ok(file) => Arc::new(file),
            Err(e) => {
                return Err(DirRefused::Unreadable {
                    key,
                    host,
                    cause: e.to_string(),
                })
            }
        };
        Ok(GrantedDir {
            host: path,
            guest: guest.to_string(),
            writable,
            handle,
        })
    }
}

/// Why a task's directory grant is refused; names the task's key and the
/// policy setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirRefused {
    #[error("cannot open the directory {host} the task grants ({key}): {cause}")]
    Unreadable {
        key: String,
        host: String,
        cause: String,
    },
    #[error("{key} asks for {host}, which overlaps {never} and is never grantable on a node")]
    Never {
        key: String,
        host: String,
        never: String,
    },
    #[error("{key} asks for {host}, which is not under any directory in this node's policy.dirs; the operator adds it there to allow it")]
    NotAllowed { key: String, host: String },
    #[error("{key} asks for {host} writable, but this node's policy.dirs allows it read-only")]
    ReadOnly { key: String, host: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_directories_are_granted_and_never_the_nodes_own() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("state");
        let data = root.path().join("data");
        let inner = data.join("inner");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&inner).unwrap();
        std::os::unix::fs::symlink(&state, data.join("to-state")).unwrap();
        let rules = [DirRule {
            path: data.display().to_string(),
            writable: false,
        }];
        let policy = DirPolicy::build(&rules, &state).unwrap();
        let s = |p: &Path| p.display().to_string();

        let granted = policy
            .grant("wasi.dirs[0]", &s(&inner), "/d", false)
            .unwrap();
        assert_eq!(granted.host, inner.canonicalize().unwrap());
        let refused = policy
            .grant("wasi.dirs[0]", &s(&inner), "/d", true)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("read-only"), "{refused}");
        for (host, needle) in [
            ("/".to_string(), "never grantable"),
            (s(&state), "never grantable"),
            (s(&data.join("to-state")), "never grantable"),
            ("/proc/self".to_string(), "never grantable"),
            ("/etc".to_string(), "policy.dirs"),
        ] {
            let refused = policy
                .grant("wasi.dirs[0]", &host, "/d", false)
                .unwrap_err()
                .to_string();
            assert!(
                refused.contains(needle) && refused.contains("wasi.dirs[0]"),
                "{host}: {refused}"
            );
        }
        // A policy may not open them either.
        for bad in ["/", "/dev", &s(&state), &s(root.path())] {
            let rules = [DirRule {
                path: bad.to_string(),
                writable: true,
            }];
            assert!(DirPolicy::build(&rules, &state).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_granted_directory_stays_the_one_checked_when_its_path_is_swapped() {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("allowed");
        let data = allowed.join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("note.txt"), "the granted one").unwrap();
        let secret = root.path().join("secret");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("note.txt"), "not yours").unwrap();
        let rule = DirRule {
            path: allowed.display().to_string(),
            writable: false,
        };
        let policy = DirPolicy::build(&[rule], &root.path().join("state")).unwrap();
        let granted = policy
            .grant("wasi.dirs", &data.display().to_string(), "/data", false)
            .unwrap();

        // After admission, the path becomes a symlink to somewhere else.
        std::fs::rename(&data, allowed.join("moved")).unwrap();
        std::os::unix::fs::symlink(&secret, &data).unwrap();

        let note = std::fs::read_to_string(granted.open_path().join("note.txt")).unwrap();
        assert_eq!(note, "the granted one");
        // A new grant checks again, and the symlink leads outside.
        let refused = policy
            .grant("wasi.dirs", &data.display().to_string(), "/data", false)
            .unwrap_err();
        assert!(
            matches!(refused, DirRefused::NotAllowed { .. }),
            "{refused}"
        );
    }
}
