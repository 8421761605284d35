//! Guest modules on the node: fetched once from a source the node policy
//! allows, checked against the task's sha256, kept in the state dir under
//! that digest.
//!
//! Nothing about a module source is trusted: only regular files are read
//! (a FIFO or `/dev/zero` is refused before it is opened for reading), the
//! size cap holds while reading, HTTP has connect and total timeouts,
//! redirects are few, stay on their scheme and are checked against the
//! policy like the first URL, and every address reached passes the node's
//! egress guard (no loopback, private or metadata address unless
//! `policy.egress` allows it). Errors say that a fetch failed, not what it
//! found.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::node_policy::{Egress, ModuleSource, PolicyCell};
use crate::wasm::hex;

/// The most redirects a module fetch follows.
const MAX_REDIRECTS: usize = 5;

/// Why a module could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("cannot read the module {uri}: {why}")]
    Read { uri: String, why: String },
    #[error("the module {uri} is not a regular file; give the path of a .wasm file")]
    NotRegular { uri: String },
    #[error(
        "the module at {uri} is over this node's limit of {limit} bytes (guests.max_module_mb)"
    )]
    TooLarge { uri: String, limit: u64 },
    #[error("fetching the module {uri} took longer than {after:?} (guests.fetch_timeout_ms)")]
    Timeout { uri: String, after: Duration },
    /// The digest found is in the node's log, not here: what a fetch
    /// found is not told to the caller.
    #[error("the module at {uri} does not have the task's sha256 {expected}; re-register the task with the module's digest (sha256sum)")]
    Digest { uri: String, expected: String },
}

/// How modules are fetched.
#[derive(Debug, Clone)]
pub struct FetchLimits {
    pub max_bytes: u64,
    pub timeout: Duration,
}

/// Modules by digest in `<state dir>/modules`.
pub struct ModuleStore {
    dir: PathBuf,
    http: reqwest::Client,
    egress: Egress,
    limits: FetchLimits,
}

impl ModuleStore {
    /// A store in `dir` whose HTTP fetches follow redirects only where
    /// the policy in force allows.
    pub fn new(dir: PathBuf, policy: PolicyCell, limits: FetchLimits) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let policy_for_fetch = policy.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            let first = attempt.previous().first().map(|u| u.scheme().to_string());
            if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else if first.as_deref() != Some(attempt.url().scheme()) {
                attempt.error("a redirect to another scheme")
            } else if !policy.current().modules.allows_url(attempt.url()) {
                attempt.error("a redirect to a source policy.modules does not allow")
            } else if let Err(refused) = policy.egress().check_url(attempt.url()) {
                attempt.error(refused)
            } else {
                attempt.follow()
            }
        });
        // Fetches reach only addresses the egress policy allows; the
        // address in a URL is checked before the fetch.
        let egress = policy_for_fetch.egress();
        let http = reqwest::Client::builder()
            .dns_resolver(egress.resolver())
            .redirect(redirects)
            .connect_timeout(Duration::from_secs(5).min(limits.timeout))
            .timeout(limits.timeout)
            .build()
            .map_err(std::io::Error::other)?;
        Ok(Self {
            dir,
            http,
            egress,
            limits,
        })
    }

    /// The module's bytes, from the node's copy or fetched from `source`.
    pub async fn get(
        &self,
        uri: &str,
        source: &ModuleSource,
        sha256: &str,
    ) -> Result<Vec<u8>, ModuleError> {
        let path = self.dir.join(format!("{sha256}.wasm"));
        let max = self.limits.max_bytes;
        if let Ok(bytes) = read_file(uri, path.clone(), max).await {
            // A damaged copy is fetched again rather than trusted.
            if hex(&Sha256::digest(&bytes)) == sha256 {
                return Ok(bytes);
            }
        }
        let bytes = match source {
            ModuleSource::File(file) => read_file(uri, file.clone(), max).await?,
            ModuleSource::Http(url) => {
                let fetch = self.fetch(uri, url.clone());
                tokio::time::timeout(self.limits.timeout, fetch)
                    .await
                    .map_err(|_| ModuleError::Timeout {
                        uri: uri.to_string(),
                        after: self.limits.timeout,
                    })??
            }
        };
        let actual = hex(&Sha256::digest(&bytes));
        if actual != sha256 {
            warn!(%uri, expected = %sha256, %actual, "module digest mismatch");
            return Err(ModuleError::Digest {
                uri: uri.to_string(),
                expected: sha256.to_string(),
            });
        }
        let tmp = path.with_extension(format!("tmp{}", rand::random::<u32>()));
        if tokio::fs::write(&tmp, &bytes).await.is_ok() {
            let _ = tokio::fs::rename(&tmp, &path).await;
        }
        info!(%uri, %sha256, bytes = bytes.len(), "guest module fetched");
        Ok(bytes)
    }

    async fn fetch(&self, uri: &str, url: reqwest::Url) -> Result<Vec<u8>, ModuleError> {
        let read = |why: String| ModuleError::Read {
            uri: uri.to_string(),
            why,
        };
        let timeout = |e: &reqwest::Error| e.is_timeout();
        let failed = |e: reqwest::Error| {
            if timeout(&e) {
                ModuleError::Timeout {
                    uri: uri.to_string(),
                    after: self.limits.timeout,
                }
            } else {
                read(crate::http_client::describe(e))
            }
        };
        self.egress
            .check_url(&url)
            .map_err(|refused| read(refused.to_string()))?;
        let mut response = self.http.get(url).send().await.map_err(failed)?;
        if !response.status().is_success() {
            // The caller learns that it failed, not what answered: a
            // status is a probe's result. The node's log has it.
            warn!(%uri, status = %response.status(), "module fetch answered with an error");
            return Err(read("the server did not answer with the module".into()));
        }
        let too_large = || ModuleError::TooLarge {
            uri: uri.to_string(),
            limit: self.limits.max_bytes,
        };
        if response
            .content_length()
            .is_some_and(|n| n > self.limits.max_bytes)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if (bytes.len() + chunk.len()) as u64 > self.limits.max_bytes {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// Reads a regular file of at most `max` bytes, off the async threads.
async fn read_file(uri: &str, path: PathBuf, max: u64) -> Result<Vec<u8>, ModuleError> {
    let uri = uri.to_string();
    let task = tokio::task::spawn_blocking(move || read_regular(&uri, &path, max));
    task.await.map_err(|e| ModuleError::Read {
        uri: String::new(),
        why: e.to_string(),
    })?
}

fn read_regular(uri: &str, path: &Path, max: u64) -> Result<Vec<u8>, ModuleError> {
    let read = |e: std::io::Error| ModuleError::Read {
        uri: uri.to_string(),
        why: e.to_string(),
    };
    // Non-blocking, so opening a FIFO cannot wait for a writer; checked
    // on the open file, so it cannot be swapped after the check.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    if !meta.is_file() {
        return Err(ModuleError::NotRegular {
            uri: uri.to_string(),
        });
    }
    let too_large = || ModuleError::TooLarge {
        uri: uri.to_string(),
        limit: max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(read)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.wasm");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        // Returns at once: a FIFO is not waited on.
        assert!(matches!(
            read_regular("fifo", &fifo, 1 << 20),
            Err(ModuleError::NotRegular { .. })
        ));
        assert!(matches!(
            read_regular("zero", Path::new("/dev/zero"), 1 << 20),
            Err(ModuleError::NotRegular { .. })
        ));
        let big = dir.path().join("big.wasm");
        std::fs::write(&big, vec![0u8; 2048]).unwrap();
        let error = read_regular("big", &big, 1024).unwrap_err();
        assert!(
            error.to_string().contains("guests.max_module_mb"),
            "{error}"
        );
        assert_eq!(read_regular("big", &big, 4096).unwrap().len(), 2048);
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        // Accepts connections and never writes a byte.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let policy =
            crate::node_policy::ModulePolicy::build(Some(&["http://127.0.0.1:*/".to_string()]))
                .unwrap();
        let limits = FetchLimits {
            max_bytes: 1 << 20,
            timeout: Duration::from_millis(300),
        };
        let mut node = crate::node_policy::NodePolicy::deny_all(dir.path());
        node.modules = policy.clone();
        node.egress = std::sync::Arc::new(
            crate::node_policy::EgressPolicy::build(&["127.0.0.1".to_string()]).unwrap(),
        );
        let cell = PolicyCell::new(node);
        let store = ModuleStore::new(dir.path().to_path_buf(), cell, limits).unwrap();
        let uri = format!("http://{addr}/m.wasm");
        let source = policy.check(&uri).unwrap();
        let error = store.get(&uri, &source, &"a".repeat(64)).await.unwrap_err();
        assert!(matches!(error, ModuleError::Timeout { .. }), "{error}");
        drop(listener);
    }
}
