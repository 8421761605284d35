//! Packages are fetched apart from running them: a server whose command
//! is `npx -y PACKAGE@VERSION …` (what a registry server.json becomes) is
//! installed once, with npm's install scripts off, into a cache the node
//! owns, then started from there in its sandbox, which then needs no
//! network and no npm cache of its own. The install itself runs as the
//! node (npm reaches its registry); nothing of the package runs during it.
//!
//! Each server has its own copy (`<cache>/<server id>/<package>`), which it
//! may write: some servers keep their data beside their code
//! (`server-memory` writes `memory.jsonl` in its package), as they do in
//! npx's cache unconfined; no other server sees that copy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::StdioCommand;

/// How long one install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Where packages are installed: `SPEAR_PACKAGE_CACHE`, else
/// `$HOME/.cache/spear/packages`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SPEAR_PACKAGE_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/var/cache".into());
    Path::new(&home).join(".cache/spear/packages")
}

/// `npx -y PACKAGE@VERSION rest…`: the package and the rest.
fn npx_package(command: &StdioCommand) -> Option<(String, Vec<String>)> {
    let name = Path::new(&command.program).file_name()?.to_str()?;
    if name != "npx" {
        return None;
    }
    let mut args = command.args.iter();
    let mut yes = false;
    for arg in args.by_ref() {
        match arg.as_str() {
            "-y" | "--yes" => yes = true,
            package if !package.starts_with('-') => {
                return (yes && is_exact_npm(package))
                    .then(|| (package.to_string(), args.cloned().collect()));
            }
            _ => return None,
        }
    }
    None
}

/// `name@version` with an npm package name (`pkg`, `@scope/pkg`) and an
/// exact version: never a URL, path, git or alias spec npm would also
/// fetch.
fn is_exact_npm(spec: &str) -> bool {
    let Some((name, version)) = spec.rsplit_once('@') else {
        return false;
    };
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._~".contains(&b))
    };
    let name_ok = match name.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(s, n)| part(s) && part(n)),
        None => part(name),
    };
    let version_ok = version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-+".contains(&b));
    name_ok && version_ok
}

/// A command to run, and the package copy it may write (when it is one).
pub struct Fetched {
    pub command: StdioCommand,
    pub package_dir: Option<PathBuf>,
}

/// The command to run for `command`: unchanged, or the server's copy of
/// the installed package's executable.
pub async fn fetched(server: &str, command: StdioCommand) -> Result<Fetched, String> {
    let Some((package, rest)) = npx_package(&command) else {
        return Ok(Fetched {
            command,
            package_dir: None,
        });
    };
    let dir = cache_dir()
        .join(server)
        .join(package.replace(['/', '@'], "_"));
    let (name, _) = package.rsplit_once('@').unwrap_or((&package, ""));
    let manifest = dir.join("node_modules").join(name).join("package.json");
    if !manifest.is_file() {
        install(server, &package, &dir).await?;
    }
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        format!("{package} was installed, but its package.json cannot be read: {e}")
    })?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{package}'s package.json is not JSON: {e}"))?;
    let bin = match &json["bin"] {
        serde_json::Value::String(_) => name.rsplit('/').next().unwrap_or(name).to_string(),
        serde_json::Value::Object(bins) if bins.len() == 1 => {
            bins.keys().next().cloned().unwrap_or_default()
        }
        serde_json::Value::Object(bins) => {
            let short = name.rsplit('/').next().unwrap_or(name);
            bins.keys().find(|k| *k == short).cloned().ok_or_else(|| {
                format!("{package} has several executables and none named {short}")
            })?
        }
        _ => {
            return Err(format!(
                "{package} has no executable (no \"bin\" in its package.json)"
            ))
        }
    };
    Ok(Fetched {
        command: StdioCommand {
            program: dir
                .join("node_modules/.bin")
                .join(bin)
                .display()
                .to_string(),
            args: rest,
            ..command
        },
        package_dir: Some(dir),
    })
}

/// Installs into a directory of its own, then renames it into place: an
/// install cut short (a node killed, a full disk) is never taken for a
/// package, and two starts installing the same package at once do not
/// write into one directory.
async fn install(server: &str, package: &str, dir: &Path) -> Result<(), String> {
    let staging = dir.with_extension(format!(
        "partial-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let done = install_into(server, package, &staging)
        .await
        .and_then(|()| {
            match std::fs::rename(&staging, dir) {
                Ok(()) => Ok(()),
                // Another install of the same package finished first.
                Err(_) if dir.join("node_modules").is_dir() => Ok(()),
                Err(e) => Err(format!("cannot move {package} into the package cache: {e}")),
            }
        });
    let _ = std::fs::remove_dir_all(&staging);
    done
}

async fn install_into(server: &str, package: &str, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot make the package cache {}: {e}", dir.display()))?;
    tracing::info!(server_id = server, package, dir = %dir.display(), "installing the server's package (install scripts off)");
    let run = tokio::process::Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(dir)
        .arg(package)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(INSTALL_TIMEOUT, run)
        .await
        .map_err(|_| format!("installing {package} took longer than {INSTALL_TIMEOUT:?}"))?
        .map_err(|e| format!("cannot run npm to install {package}: {e}"))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let first = err
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(format!(
            "npm could not install {package}: {}",
            spear_common::text::prefix(first, 300)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npx(args: &[&str]) -> StdioCommand {
        StdioCommand {
            program: "npx".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            cwd: None,
        }
    }

    #[test]
    fn only_an_exact_package_run_with_yes_is_fetched_apart() {
        let (package, rest) = npx_package(&npx(&["-y", "@scope/pkg@1.2.3", "stdio"])).unwrap();
        assert_eq!(package, "@scope/pkg@1.2.3");
        assert_eq!(rest, ["stdio"]);
        assert!(npx_package(&npx(&["@scope/pkg@1.2.3"])).is_none());
        assert!(npx_package(&npx(&["-y", "pkg"])).is_none());
        assert!(npx_package(&npx(&["-y", "--node-options=x", "pkg@1"])).is_none());
        for not_a_registry_package in [
            "http://evil.example/x.tgz@1.0.0",
            "github:user/repo@1.0.0",
            "file:../x@1.0.0",
            "alias@npm:evil@1.0.0",
            "pkg@latest",
            "pkg@^1.0.0",
            "../pkg@1.0.0",
        ] {
            assert!(
                npx_package(&npx(&["-y", not_a_registry_package])).is_none(),
                "{not_a_registry_package}"
            );
        }
    }
}
