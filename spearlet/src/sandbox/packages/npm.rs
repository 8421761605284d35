//! npm packages: `npx -y NAME@VERSION …`, installed with `npm install
//! --ignore-scripts` and run from the copy's `node_modules/.bin`.

use spear_sandbox::refusal::Refusal;
use std::path::{Path, PathBuf};

use super::super::StdioCommand;
use super::{Program, Wanted};

/// `npx -y PACKAGE@VERSION rest…`: the package and the rest.
pub fn npx_package(command: &StdioCommand) -> Option<(String, Vec<String>)> {
    let (flags, package, rest) = super::split(command, "npx", &["-y", "--yes"])?;
    (!flags.is_empty() && is_exact_npm(package)).then(|| (package.to_string(), rest))
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
    name_ok && super::is_exact_version(version, b".-+")
}

fn manifest(dir: &Path, name: &str) -> PathBuf {
    dir.join("node_modules").join(name).join("package.json")
}

fn installed(dir: &Path) -> bool {
    dir.join("node_modules").is_dir()
}

/// Installs the npm package with its install scripts off, unless the
/// server's copy is there; the package's executable runs it.
pub(super) async fn fetch(wanted: Wanted<'_>) -> Result<Program, Refusal> {
    let (server, package, dir) = (wanted.server, wanted.package, wanted.dir);
    let (name, _) = package.rsplit_once('@').unwrap_or((package, ""));
    if !manifest(dir, name).is_file() {
        tracing::info!(server_id = server, package, dir = %dir.display(), "installing the server's npm package (install scripts off)");
        super::install(package, dir, installed, |staging| async move {
            let mut npm = tokio::process::Command::new("npm");
            npm.args([
                "install",
                "--no-save",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&staging)
            .arg(package);
            super::run("npm", package, &mut npm).await
        })
        .await?;
    }
    let bin = executable(package, name, &manifest(dir, name))?;
    let program = dir.join("node_modules/.bin").join(bin);
    Ok((program.display().to_string(), wanted.rest))
}

/// The executable of the package, as npx picks it: its only one, or the
/// one named after it.
fn executable(package: &str, name: &str, manifest: &Path) -> Result<String, Refusal> {
    let text = std::fs::read_to_string(manifest).map_err(Refusal::failed(format!(
        "{package} was installed, but its package.json cannot be read"
    )))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(Refusal::failed(format!(
        "{package}'s package.json is not JSON"
    )))?;
    let short = name.rsplit('/').next().unwrap_or(name);
    match &json["bin"] {
        serde_json::Value::String(_) => Ok(short.to_string()),
        serde_json::Value::Object(bins) if bins.len() == 1 => {
            Ok(bins.keys().next().cloned().unwrap_or_default())
        }
        serde_json::Value::Object(bins) => {
            bins.keys().find(|k| *k == short).cloned().ok_or_else(|| {
                Refusal::Cannot(format!(
                    "{package} has several executables and none named {short}"
                ))
            })
        }
        _ => Err(Refusal::Cannot(format!(
            "{package} has no executable (no \"bin\" in its package.json)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npx(args: &[&str]) -> StdioCommand {
        StdioCommand::of("npx", args)
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
