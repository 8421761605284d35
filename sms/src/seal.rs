//! Sealing at rest: AES-256-GCM under SMS's key (`--oauth-key-file`), with
//! what a sealed value belongs to as associated data, so bytes copied onto
//! another record do not open. The store (etcd, or memory) only ever sees
//! sealed bytes; without the key they are noise.
//!
//! Two uses: OAuth credentials ([`SealingKey::seal`], a fresh random nonce
//! each time) and the literal values of server files
//! ([`SealingKey::seal_fixed`], a nonce derived from the key, the
//! associated data and the value, so a value seals the same way on every
//! replica and the registry does not change when nothing did; equal values
//! then seal equal, which says nothing about what they are).

use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hmac;
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
#[error("the sealed value does not open with this key")]
pub struct Unsealable;

/// SMS's key for what it keeps sealed. `Debug` shows only its id.
pub struct SealingKey {
    key: LessSafeKey,
    /// Derives [`SealingKey::seal_fixed`]'s nonces; never the sealing key
    /// itself.
    nonces: hmac::Key,
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
        let mut derived = Sha256::new();
        derived.update(b"spear: nonces of fixed seals\0");
        derived.update(bytes);
        Some(SealingKey {
            key: LessSafeKey::new(key),
            nonces: hmac::Key::new(hmac::HMAC_SHA256, &derived.finalize()),
            id,
        })
    }

    /// A random key that lives as long as this process: for an SMS that
    /// keeps its registry in memory and was given no key file, whose sealed
    /// values need not outlive it.
    pub fn ephemeral() -> Result<SealingKey, Unsealable> {
        let mut bytes = [0u8; KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| Unsealable)?;
        SealingKey::from_bytes(&bytes).ok_or(Unsealable)
    }

    /// Names the key in records and status without revealing it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `plain` sealed for `owner` (the associated data) under a random
    /// nonce: nonce, then ciphertext and tag.
    pub fn seal(&self, owner: &str, plain: &[u8]) -> Result<Vec<u8>, Unsealable> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| Unsealable)?;
        self.seal_with(nonce, owner, plain)
    }

    /// `plain` sealed for `owner` the same way every time (see the module
    /// docs): for values that are sealed again whenever their file is read.
    pub fn seal_fixed(&self, owner: &str, plain: &[u8]) -> Result<Vec<u8>, Unsealable> {
        let mut context = hmac::Context::with_key(&self.nonces);
        context.update(&(owner.len() as u64).to_be_bytes());
        context.update(owner.as_bytes());
        context.update(plain);
        let tag = context.sign();
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&tag.as_ref()[..NONCE_LEN]);
        self.seal_with(nonce, owner, plain)
    }

    fn seal_with(
        &self,
        nonce: [u8; NONCE_LEN],
        owner: &str,
        plain: &[u8],
    ) -> Result<Vec<u8>, Unsealable> {
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(owner.as_bytes()),
                &mut data,
            )
            .map_err(|_| Unsealable)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(out)
    }

    /// What [`SealingKey::seal`] or [`SealingKey::seal_fixed`] sealed for
    /// `owner`.
    pub fn open(&self, owner: &str, sealed: &[u8]) -> Result<Vec<u8>, Unsealable> {
        if sealed.len() < NONCE_LEN {
            return Err(Unsealable);
        }
        let (nonce, data) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unsealable)?;
        let mut data = data.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(owner.as_bytes()), &mut data)
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
    fn fixed_seals_are_the_same_for_the_same_value_owner_and_key_only() {
        let key = key();
        let once = key.seal_fixed("docs/env/API_KEY", b"sk-live-1").unwrap();
        assert_eq!(
            once,
            key.seal_fixed("docs/env/API_KEY", b"sk-live-1").unwrap()
        );
        assert_ne!(
            once,
            key.seal_fixed("docs/env/API_KEY", b"sk-live-2").unwrap()
        );
        assert_ne!(
            once,
            key.seal_fixed("docs/env/OTHER", b"sk-live-1").unwrap()
        );
        let other = SealingKey::from_bytes(&[8u8; KEY_LEN]).unwrap();
        assert_ne!(
            once,
            other.seal_fixed("docs/env/API_KEY", b"sk-live-1").unwrap()
        );
        assert_eq!(key.open("docs/env/API_KEY", &once).unwrap(), b"sk-live-1");
        assert!(
            key.open("docs/env/OTHER", &once).is_err(),
            "moved to another name"
        );
        assert!(!once.windows(9).any(|w| w == b"sk-live-1"));
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
