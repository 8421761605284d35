//! Compiled guest modules, cached twice: linked modules in memory (the most
//! recently used [`MAX_CACHED_MODULES`]) and compiled artifacts on disk.
//!
//! Loading a compiled artifact runs native code, so the disk cache trusts
//! nothing it reads: each artifact is stored with an HMAC-SHA256 over the
//! source module's digest and the artifact, keyed by a random key in a file
//! only the node can read (`key`, mode 0600, in a 0700 directory that no task
//! may be granted). An artifact whose MAC does not check out (tampered,
//! truncated, or written by someone else) is logged and compiled again.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tracing::warn;

/// Linked modules kept in memory; older ones are dropped (the compiled
/// form stays on disk, so they come back quickly).
pub const MAX_CACHED_MODULES: usize = 128;

/// The largest artifact read back from disk.
const MAX_ARTIFACT_BYTES: u64 = 1 << 30;

const MAC_LEN: usize = 32;

/// Linked modules (or components) by sha256, dropping the least recently
/// used past [`MAX_CACHED_MODULES`].
pub struct ModuleCache<V> {
    modules: HashMap<[u8; 32], (V, u64)>,
    clock: u64,
}

impl<V> Default for ModuleCache<V> {
    fn default() -> Self {
        ModuleCache {
            modules: HashMap::new(),
            clock: 0,
        }
    }
}

impl<V: Clone> ModuleCache<V> {
    pub fn get(&mut self, digest: &[u8; 32]) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        self.modules.get_mut(digest).map(|(pre, used)| {
            *used = clock;
            pre.clone()
        })
    }

    pub fn insert(&mut self, digest: [u8; 32], pre: V) {
        if self.modules.len() >= MAX_CACHED_MODULES && !self.modules.contains_key(&digest) {
            let oldest = self
                .modules
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(d, _)| *d);
            if let Some(oldest) = oldest {
                self.modules.remove(&oldest);
            }
        }
        self.clock += 1;
        self.modules.insert(digest, (pre, self.clock));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.modules.len()
    }
}

/// Signed compiled artifacts in a directory private to the node.
pub struct ArtifactDir {
    dir: PathBuf,
    key: [u8; 32],
}

impl ArtifactDir {
    /// Opens (or creates) `dir` with mode 0700 and its key file.
    pub fn open(dir: &Path) -> std::io::Result<ArtifactDir> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        let key_path = dir.join("key");
        let key = match std::fs::read(&key_path) {
            Ok(bytes) if bytes.len() == 32 => {
                let mut key = [0u8; 32];
                key.copy_from_slice(&bytes);
                key
            }
            _ => {
                let key: [u8; 32] = rand::random();
                write_private(&key_path, &key)?;
                key
            }
        };
        Ok(ArtifactDir {
            dir: dir.to_path_buf(),
            key,
        })
    }

    fn path(&self, digest: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}.cwasm", super::hex(digest)))
    }

    fn mac(&self, digest: &[u8; 32], artifact: &[u8]) -> Hmac<Sha256> {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(digest);
        mac.update(artifact);
        mac
    }

    /// The artifact for `digest`, if one is stored and its MAC checks out.
    pub fn read(&self, digest: &[u8; 32]) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let file = std::fs::File::open(&path).ok()?;
        let len = file.metadata().ok()?.len();
        if !file.metadata().ok()?.is_file() || len > MAX_ARTIFACT_BYTES {
            warn!(path = %path.display(), "not a compiled module this node wrote; compiling again");
            return None;
        }
        let mut bytes = Vec::with_capacity(len as usize);
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_ARTIFACT_BYTES),
            &mut bytes,
        )
        .ok()?;
        if bytes.len() < MAC_LEN {
            warn!(path = %path.display(), "compiled module is truncated; compiling again");
            return None;
        }
        let artifact = bytes.split_off(MAC_LEN);
        if self.mac(digest, &artifact).verify_slice(&bytes).is_err() {
            warn!(path = %path.display(), "compiled module fails its integrity check (changed since this node wrote it); compiling again");
            return None;
        }
        Some(artifact)
    }

    /// Stores `artifact` for `digest` with its MAC (written whole, then renamed).
    pub fn write(&self, digest: &[u8; 32], artifact: &[u8]) -> std::io::Result<()> {
        let path = self.path(digest);
        let tmp = path.with_extension(format!("tmp{}", rand::random::<u32>()));
        let mac = self.mac(digest, artifact).finalize().into_bytes();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = file
            .write_all(&mac)
            .and_then(|()| file.write_all(artifact))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_read_back_only_untampered() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactDir::open(&dir.path().join("compiled")).unwrap();
        let digest = [7u8; 32];
        cache.write(&digest, b"native code").unwrap();
        assert_eq!(cache.read(&digest).as_deref(), Some(&b"native code"[..]));

        // Private to the node.
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("compiled")), 0o700);
        assert_eq!(mode(&cache.path(&digest)), 0o600);
        assert_eq!(mode(&dir.path().join("compiled/key")), 0o600);

        // One flipped byte, a truncation, a planted file: none is loaded.
        let path = cache.path(&digest);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(cache.read(&digest), None);
        std::fs::write(&path, &bytes[..10]).unwrap();
        assert_eq!(cache.read(&digest), None);
        std::fs::write(&path, b"planted by a guest with a writable grant").unwrap();
        assert_eq!(cache.read(&digest), None);

        // The same artifact under another digest is not accepted either.
        cache.write(&digest, b"native code").unwrap();
        std::fs::copy(&path, cache.path(&[8u8; 32])).unwrap();
        assert_eq!(cache.read(&[8u8; 32]), None);

        // The key survives a restart, so the cache does too.
        let again = ArtifactDir::open(&dir.path().join("compiled")).unwrap();
        assert_eq!(again.read(&digest).as_deref(), Some(&b"native code"[..]));
    }
}
