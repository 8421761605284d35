//! The node's state dir: the last good registry, the applied-history log and
//! the node id. Everything is written atomically (temp file, fsync, rename),
//! and anything unreadable is reported and ignored, never fatal.

mod applied_log;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use prost::Message;
use spear_proto::v1::ListServersResponse;
use tracing::warn;

pub use applied_log::{Applied, AppliedLog, BadLine};

use crate::registry::RegistryView;

/// Why the state dir could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("cannot write {path}: {cause}")]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot create the state dir {path}: {cause}")]
    CreateDir {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// Paths inside the state dir.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Opens (or creates) the state dir, private to the node (0700): it
    /// holds the compiled-module cache and its key.
    pub fn open(root: &Path) -> Result<Self, PersistError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let private = std::fs::Permissions::from_mode(0o700);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .and_then(|()| std::fs::set_permissions(root, private))
            .map_err(|cause| PersistError::CreateDir {
                path: root.to_path_buf(),
                cause,
            })?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// A state dir for reading only (the `registry` command).
    pub fn at(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    pub fn registry_file(&self) -> PathBuf {
        self.root.join("registry.pb")
    }

    pub fn applied_log_file(&self) -> PathBuf {
        self.root.join("applied.log")
    }

    /// The last persisted registry; empty (with a warning) when missing or corrupt.
    pub fn load_registry(&self) -> RegistryView {
        let path = self.registry_file();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return RegistryView::default(),
            Err(error) => {
                warn!(path = %path.display(), %error, "cannot read the persisted registry; starting empty");
                return RegistryView::default();
            }
        };
        match ListServersResponse::decode(bytes.as_slice()) {
            Ok(list) => RegistryView {
                epoch: list.epoch,
                revision: list.revision,
                servers: list
                    .servers
                    .into_iter()
                    .filter_map(|r| {
                        r.spec
                            .as_ref()
                            .map(|s| s.id.clone())
                            .map(|id| (id, Arc::new(r)))
                    })
                    .collect(),
            },
            Err(error) => {
                warn!(path = %path.display(), %error, "the persisted registry is corrupt; starting empty and resyncing");
                RegistryView::default()
            }
        }
    }

    /// Persists `view` atomically.
    pub fn save_registry(&self, view: &RegistryView) -> Result<(), PersistError> {
        let list = ListServersResponse {
            epoch: view.epoch,
            revision: view.revision,
            servers: view.servers.values().map(|r| (**r).clone()).collect(),
        };
        write_atomic(&self.registry_file(), &list.encode_to_vec())
    }

    /// The node id stored here, or `fallback()` stored for next time.
    pub fn node_id(&self, fallback: impl FnOnce() -> String) -> Result<String, PersistError> {
        let path = self.root.join("node-id");
        if let Ok(id) = std::fs::read_to_string(&path) {
            let id = id.trim();
            if !id.is_empty() {
                return Ok(id.to_string());
            }
        }
        let id = fallback();
        write_atomic(&path, id.as_bytes())?;
        Ok(id)
    }
}

/// Writes `bytes` to `path` so readers see the old or the new file, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let tmp = path.with_extension("tmp");
    let error = |cause| PersistError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let mut file = std::fs::File::create(&tmp).map_err(error)?;
    file.write_all(bytes).map_err(error)?;
    file.sync_all().map_err(error)?;
    std::fs::rename(&tmp, path).map_err(error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use spear_proto::v1::{ServerRecord, ServerSpec};

    #[test]
    fn registry_round_trips_and_corruption_is_survived() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert_eq!(state.load_registry(), RegistryView::default());
        let record = ServerRecord {
            spec: Some(ServerSpec {
                id: "fs".into(),
                ..Default::default()
            }),
            source: None,
            mod_revision: 3,
            pins: None,
        };
        let view = RegistryView {
            epoch: 9,
            revision: 3,
            servers: [("fs".to_string(), Arc::new(record))].into(),
        };
        state.save_registry(&view).unwrap();
        assert_eq!(state.load_registry(), view);
        std::fs::write(state.registry_file(), b"\xff\xff\xff not protobuf").unwrap();
        assert_eq!(state.load_registry(), RegistryView::default());
        assert!(!state.registry_file().with_extension("tmp").exists());
    }

    #[test]
    fn node_id_is_stable() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let first = state.node_id(|| "node-a".into()).unwrap();
        let second = state.node_id(|| "node-b".into()).unwrap();
        assert_eq!((first.as_str(), second.as_str()), ("node-a", "node-a"));
    }
}
