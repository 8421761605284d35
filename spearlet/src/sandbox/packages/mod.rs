//! Packages are fetched apart from running them: a server whose command
//! is `npx -y PACKAGE@VERSION …` or `uvx PACKAGE==VERSION …` (what a
//! registry server.json becomes) is installed once into a cache the node
//! owns, with nothing of the package run during the install (npm's install
//! scripts off; for PyPI wheels only, so no build script runs), then
//! started from there in its sandbox, which then needs no network and no
//! package cache of its own. The install runs as the node, which reaches
//! the package registry; the server never does.
//!
//! Entry point: [`fetched`]. Each server has its own copy
//! (`<cache>/<server id>/<package>`), which it may write: some servers keep
//! their data beside their code (`server-memory` writes `memory.jsonl` in
//! its package), as they do in npx's cache unconfined; no other server sees
//! that copy. `npm.rs` and `pypi.rs` know their registry's specs, installs
//! and executables.

mod npm;
mod pypi;

use spear_sandbox::refusal::Refusal;
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

/// A command to run, and the package copy it may write (when it is one).
pub struct Fetched {
    pub command: StdioCommand,
    pub package_dir: Option<PathBuf>,
}

/// The command to run for `command`: unchanged, or the server's copy of
/// the installed package's executable.
pub async fn fetched(server: &str, command: StdioCommand) -> Result<Fetched, Refusal> {
    let (package, rest, is_npm) = match (npm::npx_package(&command), pypi::uvx_package(&command)) {
        (Some((package, rest)), _) => (package, rest, true),
        (None, Some((package, rest))) => (package, rest, false),
        (None, None) => {
            return Ok(Fetched {
                command,
                package_dir: None,
            })
        }
    };
    let dir = package_dir(server, &package);
    let wanted = Wanted {
        server,
        package: &package,
        dir: &dir,
        rest,
    };
    let (program, args) = match is_npm {
        true => npm::fetch(wanted).await?,
        false => pypi::fetch(wanted).await?,
    };
    Ok(Fetched {
        command: StdioCommand {
            program,
            args,
            ..command
        },
        package_dir: Some(dir),
    })
}

/// A package a server's command runs: the server, the exact package spec,
/// the server's copy of it, and the arguments after the package.
struct Wanted<'a> {
    server: &'a str,
    package: &'a str,
    dir: &'a Path,
    rest: Vec<String>,
}

/// The program to start and its arguments.
type Program = (String, Vec<String>);

/// `RUNTIME FLAG… PACKAGE rest…` where each flag is one of `flags`: the
/// flags given, the package and the rest. Anything else in front (which a
/// registry file cannot put there) is not a package run as written.
fn split<'a>(
    command: &'a StdioCommand,
    runtime: &str,
    flags: &[&str],
) -> Option<(Vec<&'a str>, &'a str, Vec<String>)> {
    let name = std::path::Path::new(&command.program)
        .file_name()?
        .to_str()?;
    if name != runtime {
        return None;
    }
    let mut given = Vec::new();
    let mut args = command.args.iter();
    for arg in args.by_ref() {
        match arg.as_str() {
            flag if flags.contains(&flag) => given.push(flag),
            package if !package.starts_with('-') => {
                return Some((given, package, args.cloned().collect()));
            }
            _ => return None,
        }
    }
    None
}

/// Whether `version` is one exact version: it starts with a digit and
/// holds only letters, digits and `extra` (each registry's separators),
/// never a range, tag or URL.
fn is_exact_version(version: &str, extra: &[u8]) -> bool {
    version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
}

/// This server's copy of `package`.
fn package_dir(server: &str, package: &str) -> PathBuf {
    cache_dir()
        .join(server)
        .join(package.replace(['/', '@', '='], "_"))
}

/// Installs with `install_into` into a directory of its own, then renames
/// it into place: an install cut short (a node killed, a full disk) is
/// never taken for a package, and two starts installing the same package
/// at once do not write into one directory. `done` says whether `dir`
/// already holds an installed package.
async fn install<F, Fut>(
    package: &str,
    dir: &Path,
    done: fn(&Path) -> bool,
    install_into: F,
) -> Result<(), Refusal>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<(), Refusal>>,
{
    let staging = dir.with_extension(format!(
        "partial-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let installed = match std::fs::create_dir_all(&staging) {
        Ok(()) => install_into(staging.clone()).await,
        Err(e) => Err(Refusal::cannot(format!(
            "make the package cache {}",
            staging.display()
        ))(e)),
    };
    let moved = installed.and_then(|()| match std::fs::rename(&staging, dir) {
        Ok(()) => Ok(()),
        // Another install of the same package finished first.
        Err(_) if done(dir) => Ok(()),
        Err(e) => Err(Refusal::cannot(format!(
            "move {package} into the package cache"
        ))(e)),
    });
    let _ = std::fs::remove_dir_all(&staging);
    moved
}

/// Runs one installer step; its failure is one sentence with the first
/// line the installer printed.
async fn run(
    what: &str,
    package: &str,
    command: &mut tokio::process::Command,
) -> Result<(), Refusal> {
    let run = command
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(INSTALL_TIMEOUT, run)
        .await
        .map_err(|_| {
            Refusal::Cannot(format!(
                "installing {package} took longer than {INSTALL_TIMEOUT:?}"
            ))
        })?
        .map_err(Refusal::cannot(format!("run {what} to install {package}")))?;
    if output.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&output.stderr);
    let first = err
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    Err(Refusal::Cannot(format!(
        "{what} could not install {package}: {}",
        spear_common::text::prefix(first, 300)
    )))
}
