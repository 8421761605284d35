//! Where this node fetches guest modules from: URI prefixes.
//!
//! `https://` allows any host over https; `https://host/path/` one host and
//! path prefix (`host:port`, or `host:*` for any port); `file:///dir/` files
//! under a directory, compared after resolving symlinks. The default is
//! `https://` alone. Redirects are checked against the same list.

use std::path::{Path, PathBuf};

use reqwest::Url;

use super::PolicyError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Any host over this scheme.
    Scheme(String),
    Prefix {
        scheme: String,
        host: String,
        /// `None` for any port.
        port: Option<u16>,
        path: String,
    },
    Dir(PathBuf),
}

/// The allowed sources.
#[derive(Debug, Clone)]
pub struct ModulePolicy {
    sources: Vec<Source>,
}

impl Default for ModulePolicy {
    fn default() -> Self {
        ModulePolicy {
            sources: vec![Source::Scheme("https".into())],
        }
    }
}

/// Where a module will be read from, once allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleSource {
    /// A resolved path on this node.
    File(PathBuf),
    Http(Url),
}

/// Why a module source entry is not one.
#[derive(Debug, thiserror::Error)]
enum BadSource {
    #[error("a file source is file:///absolute/dir/ (ending in '/')")]
    FileShape,
    #[error("cannot resolve {path}: {cause}")]
    Unresolved { path: String, cause: std::io::Error },
    #[error("a source starts with https://, http:// or file://")]
    Scheme,
    #[error("a host source ends its host with '/' (https://host/ or https://host/dir/)")]
    HostEnd,
    #[error("a source's path ends in '/' so it names a directory")]
    PathEnd,
    #[error("bad port '{0}'")]
    Port(String),
    #[error("a source names a host")]
    NoHost,
}

fn parse(entry: &str) -> Result<Source, BadSource> {
    if let Some(path) = entry.strip_prefix("file://") {
        if !path.starts_with('/') || !path.ends_with('/') {
            return Err(BadSource::FileShape);
        }
        let dir = std::fs::canonicalize(path).map_err(|cause| BadSource::Unresolved {
            path: path.to_string(),
            cause,
        })?;
        return Ok(Source::Dir(dir));
    }
    let (scheme, rest) = entry
        .split_once("://")
        .filter(|(s, _)| *s == "https" || *s == "http")
        .ok_or(BadSource::Scheme)?;
    if rest.is_empty() {
        return Ok(Source::Scheme(scheme.to_string()));
    }
    let (authority, path) = rest
        .split_once('/')
        .map(|(a, p)| (a, format!("/{p}")))
        .ok_or(BadSource::HostEnd)?;
    if !path.ends_with('/') {
        return Err(BadSource::PathEnd);
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, "*")) => (host, None),
        Some((host, port)) => (
            host,
            Some(
                port.parse::<u16>()
                    .map_err(|_| BadSource::Port(port.to_string()))?,
            ),
        ),
        None => (authority, Some(if scheme == "https" { 443 } else { 80 })),
    };
    if host.is_empty() || host.contains('@') {
        return Err(BadSource::NoHost);
    }
    Ok(Source::Prefix {
        scheme: scheme.to_string(),
        host: host.to_ascii_lowercase(),
        port,
        path,
    })
}

impl ModulePolicy {
    /// `None` is the default (`https://`).
    pub fn build(entries: Option<&[String]>) -> Result<ModulePolicy, PolicyError> {
        let Some(entries) = entries else {
            return Ok(ModulePolicy::default());
        };
        let sources = entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                parse(entry).map_err(|why| PolicyError {
                    setting: format!("modules[{i}]"),
                    why: format!("'{entry}': {why}"),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(ModulePolicy { sources })
    }

    /// The directories `file://` sources name.
    pub fn file_roots(&self) -> impl Iterator<Item = &Path> {
        self.sources.iter().filter_map(|source| match source {
            Source::Dir(dir) => Some(dir.as_path()),
            _ => None,
        })
    }

    /// Whether an http(s) URL (a module URI or a redirect) is allowed.
    pub fn allows_url(&self, url: &Url) -> bool {
        let host = url.host_str().unwrap_or("").to_ascii_lowercase();
        self.sources.iter().any(|source| match source {
            Source::Scheme(scheme) => url.scheme() == scheme,
            Source::Prefix {
                scheme,
                host: allowed,
                port,
                path,
            } => {
                url.scheme() == scheme
                    && host == *allowed
                    && port.is_none_or(|p| url.port_or_known_default() == Some(p))
                    && url.path().starts_with(path.as_str())
            }
            Source::Dir(_) => false,
        })
    }

    /// Checks a task's module URI; the refusal names the policy setting.
    pub fn check(&self, uri: &str) -> Result<ModuleSource, ModuleRefused> {
        let shown: String = uri.chars().take(200).collect();
        let refused = || ModuleRefused::NotAllowed { uri: shown.clone() };
        if let Some(path) = uri.strip_prefix("file://") {
            // Resolved first, so a symlink cannot lead outside the roots.
            let resolved =
                std::fs::canonicalize(Path::new(path)).map_err(|e| ModuleRefused::Unreadable {
                    uri: shown.clone(),
                    cause: e.to_string(),
                })?;
            let allowed = self.sources.iter().any(|source| match source {
                Source::Dir(dir) => resolved.starts_with(dir),
                _ => false,
            });
            return if allowed {
                Ok(ModuleSource::File(resolved))
            } else {
                Err(refused())
            };
        }
        let url = Url::parse(uri).map_err(|_| refused())?;
        if self.allows_url(&url) {
            Ok(ModuleSource::Http(url))
        } else {
            Err(refused())
        }
    }
}

/// Why a task's module URI is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModuleRefused {
    #[error("module_uri {uri} is not a source this node's policy.modules allows; the operator adds its prefix there")]
    NotAllowed { uri: String },
    #[error("cannot read the module {uri}: {cause}")]
    Unreadable { uri: String, cause: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_allow_only_what_they_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("modules");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.wasm"), b"x").unwrap();
        std::fs::write(dir.path().join("outside.wasm"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.wasm"), root.join("link.wasm"))
            .unwrap();
        let policy = ModulePolicy::build(Some(&[
            format!("file://{}/", root.display()),
            "https://modules.example.com/spear/".into(),
            "http://127.0.0.1:*/".into(),
        ]))
        .unwrap();
        let file = |name: &str| format!("file://{}", root.join(name).display());
        assert!(policy.check(&file("a.wasm")).is_ok());
        assert!(policy
            .check(&file("link.wasm"))
            .unwrap_err()
            .to_string()
            .contains("policy.modules"));
        assert!(policy
            .check(&format!("file://{}/outside.wasm", dir.path().display()))
            .is_err());
        assert!(policy
            .check("https://modules.example.com/spear/a.wasm")
            .is_ok());
        assert!(policy
            .check("https://modules.example.com/other/a.wasm")
            .is_err());
        assert!(policy
            .check("https://modules.example.com.evil.net/spear/a.wasm")
            .is_err());
        assert!(
            policy
                .check("http://modules.example.com/spear/a.wasm")
                .is_err(),
            "scheme"
        );
        assert!(policy.check("http://127.0.0.1:8123/a.wasm").is_ok());
        assert!(policy.check("http://localhost:8123/a.wasm").is_err());

        let default = ModulePolicy::default();
        assert!(default.check("https://anywhere.example/a.wasm").is_ok());
        assert!(default.check("http://anywhere.example/a.wasm").is_err());
        assert!(default.check(&file("a.wasm")).is_err());

        for bad in [
            "ftp://x/",
            "file://relative/",
            "https://host",
            "https://host/a.wasm",
            "https://host:x/",
        ] {
            assert!(
                ModulePolicy::build(Some(&[bad.to_string()])).is_err(),
                "{bad}"
            );
        }
    }
}
