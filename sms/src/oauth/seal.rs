//! Sealing credentials at rest: AES-256-GCM under a key given to SMS
//! (`--oauth-key-file`), a fresh random nonce per seal, and the server id as
//! associated data, so a record copied onto another server's key in the
//! store does not open. The store (etcd, or memory) only ever sees sealed
//! bytes; without the key they are noise.

use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use sha2::{Digest, Sha256};

const KEY_LEN: usize = 32;
const ENGINE: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Why a key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the OAuth key file {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the OAuth key file {0} does not hold a key: it must be 32 random bytes in base64 (make one with `sms oauth keygen FILE`)")]
    Malformed(PathBuf),
    #[error("cannot write the OAuth key file {path}: {cause}")]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// The record does not open with this key: sealed with another key, or
/// altered.
#[derive(Debug, thiserror::Error)]
#[error("the sealed credential does not open with this key")]
pub struct Unsealable;

/// SMS's key for credentials at rest. `Debug` shows only its id.
pub struct SealingKey {
    key: LessSafeKey,
    id: String,
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealingKey").field("id", &self.id).finish()
    }
}

impl SealingKey {
    /// The key in `path`: 32 bytes in base64, surrounding whitespace allowed.
    pub fn from_file(path: &Path) -> Result<SealingKey, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|cause| KeyError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        let bytes = ENGINE
            .decode(text.trim())
            .map_err(|_| KeyError::Malformed(path.to_path_buf()))?;
        SealingKey::from_bytes(&bytes).ok_or_else(|| KeyError::Malformed(path.to_path_buf()))
    }

    /// A new random key written to `path` (created with mode 0600, never
    /// over an existing file).
    pub fn generate(path: &Path) -> Result<SealingKey, KeyError> {
        let mut bytes = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| KeyError::Write {
                path: path.to_path_buf(),
                cause: std::io::Error::other("the system has no randomness to give"),
            })?;
        write_new(path, &ENGINE.encode(bytes)).map_err(|cause| KeyError::Write {
            path: path.to_path_buf(),
            cause,
        })?;
        SealingKey::from_bytes(&bytes).ok_or_else(|| KeyError::Malformed(path.to_path_buf()))
    }

    fn from_bytes(bytes: &[u8]) -> Option<SealingKey> {
        if bytes.len() != KEY_LEN {
            return None;
        }
        let key = UnboundKey::new(&AES_256_GCM, bytes).ok()?;
        let id = hex::encode(&Sha256::digest(bytes)[..8]);
        Some(SealingKey {
            key: LessSafeKey::new(key),
            id,
        })
    }

    /// Names the key in records and status without revealing it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `plain` sealed for `server_id`: nonce, then ciphertext and tag.
    pub fn seal(&self, server_id: &str, plain: &[u8]) -> Result<Vec<u8>, Unsealable> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| Unsealable)?;
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(server_id.as_bytes()),
                &mut data,
            )
            .map_err(|_| Unsealable)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(out)
    }

    /// What [`SealingKey::seal`] sealed for `server_id`.
    pub fn open(&self, server_id: &str, sealed: &[u8]) -> Result<Vec<u8>, Unsealable> {
        if sealed.len() < NONCE_LEN {
            return Err(Unsealable);
        }
        let (nonce, data) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unsealable)?;
        let mut data = data.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(server_id.as_bytes()), &mut data)
            .map_err(|_| Unsealable)?;
        Ok(plain.to_vec())
    }
}

fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SealingKey {
        SealingKey::from_bytes(&[7u8; KEY_LEN]).unwrap()
    }

    #[test]
    fn sealed_bytes_open_only_for_their_server_and_key() {
        let key = key();
        let sealed = key.seal("docs", b"refresh-token-value").unwrap();
        assert!(!sealed
            .windows(b"refresh-token-value".len())
            .any(|w| w == b"refresh-token-value"));
        assert_eq!(key.open("docs", &sealed).unwrap(), b"refresh-token-value");
        assert!(
            key.open("other", &sealed).is_err(),
            "moved to another server"
        );
        let other = SealingKey::from_bytes(&[8u8; KEY_LEN]).unwrap();
        assert!(other.open("docs", &sealed).is_err(), "another key");
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(key.open("docs", &altered).is_err(), "altered");
        assert!(key.open("docs", &sealed[..4]).is_err(), "truncated");
    }

    #[test]
    fn two_seals_of_one_value_differ() {
        let key = key();
        assert_ne!(key.seal("a", b"x").unwrap(), key.seal("a", b"x").unwrap());
    }

    #[test]
    fn key_files_are_made_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oauth.key");
        let made = SealingKey::generate(&path).unwrap();
        assert!(SealingKey::generate(&path).is_err(), "never overwrites");
        let read = SealingKey::from_file(&path).unwrap();
        assert_eq!(made.id(), read.id());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join("bad"), "not base64 at all!").unwrap();
        let error = SealingKey::from_file(&dir.path().join("bad")).unwrap_err();
        assert!(error.to_string().contains("sms oauth keygen"), "{error}");
    }
}
