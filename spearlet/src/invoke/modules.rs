//! Guest modules on the node: fetched by URI once, checked against the
//! task's sha256, kept in the state dir under that digest.

use std::path::PathBuf;

use sha2::{Digest, Sha256};
use tracing::info;

use crate::wasm::hex;

/// The largest module a node accepts.
pub const MAX_MODULE_BYTES: u64 = 64 * 1024 * 1024;

/// Why a module could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("cannot read the module {uri}: {why}")]
    Read { uri: String, why: String },
    #[error("the module at {uri} is over {MAX_MODULE_BYTES} bytes")]
    TooLarge { uri: String },
    #[error("the module at {uri} has sha256 {actual}, not the task's {expected}; re-register the task with the module's digest (sha256sum)")]
    Digest {
        uri: String,
        expected: String,
        actual: String,
    },
}

/// Modules by digest in `<state dir>/modules`.
pub struct ModuleStore {
    dir: PathBuf,
    http: reqwest::Client,
}

impl ModuleStore {
    pub fn new(dir: PathBuf, http: reqwest::Client) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Self { dir, http })
    }

    /// The module's bytes, from the node's copy or fetched from `uri`.
    pub async fn get(&self, uri: &str, sha256: &str) -> Result<Vec<u8>, ModuleError> {
        let path = self.dir.join(format!("{sha256}.wasm"));
        if let Ok(bytes) = tokio::fs::read(&path).await {
            // A damaged copy is fetched again rather than trusted.
            if hex(&Sha256::digest(&bytes)) == sha256 {
                return Ok(bytes);
            }
        }
        let bytes = self.fetch(uri).await?;
        let actual = hex(&Sha256::digest(&bytes));
        if actual != sha256 {
            return Err(ModuleError::Digest {
                uri: uri.to_string(),
                expected: sha256.to_string(),
                actual,
            });
        }
        let tmp = path.with_extension(format!("tmp{}", rand::random::<u32>()));
        if tokio::fs::write(&tmp, &bytes).await.is_ok() {
            let _ = tokio::fs::rename(&tmp, &path).await;
        }
        info!(%uri, %sha256, bytes = bytes.len(), "guest module fetched");
        Ok(bytes)
    }

    async fn fetch(&self, uri: &str) -> Result<Vec<u8>, ModuleError> {
        let read = |why: String| ModuleError::Read {
            uri: uri.to_string(),
            why,
        };
        if let Some(path) = uri.strip_prefix("file://") {
            let meta = tokio::fs::metadata(path)
                .await
                .map_err(|e| read(format!("{e} (the path must exist on this node)")))?;
            if meta.len() > MAX_MODULE_BYTES {
                return Err(ModuleError::TooLarge { uri: uri.into() });
            }
            return tokio::fs::read(path).await.map_err(|e| read(e.to_string()));
        }
        let response = self
            .http
            .get(uri)
            .send()
            .await
            .map_err(|e| read(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(read(format!("the server answered {}", response.status())));
        }
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| read(e.without_url().to_string()))?
        {
            if (bytes.len() + chunk.len()) as u64 > MAX_MODULE_BYTES {
                return Err(ModuleError::TooLarge { uri: uri.into() });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// Parses 64 hex digits.
pub(crate) fn digest_bytes(sha256: &str) -> Option<[u8; 32]> {
    if sha256.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(sha256.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
