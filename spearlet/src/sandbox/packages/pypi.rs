//! PyPI packages: `uvx NAME==VERSION …`, installed into a virtual
//! environment of the server's own with pip, wheels only (a source
//! distribution would run its build script during the install), and run
//! as uvx runs them: the executable named after the package.
//!
//! The environment is made in a staging directory and renamed into place,
//! so the scripts' `#!` lines name a path that is gone; the node runs the
//! environment's own `python` with the script as its argument, which
//! ignores that line and finds the environment beside itself.

use spear_sandbox::refusal::Refusal;
use std::path::Path;

use super::super::StdioCommand;
use super::{Program, Wanted};

/// What the node makes environments with.
const PYTHON: &str = "python3";

/// `uvx [-q|--quiet|--offline] NAME==VERSION rest…`: the package and the
/// rest. Anything else in front (which a registry file cannot put there)
/// leaves the command as written.
pub fn uvx_package(command: &StdioCommand) -> Option<(String, Vec<String>)> {
    let (_, package, rest) = super::split(command, "uvx", &["-q", "--quiet", "--offline"])?;
    is_exact_pypi(package).then(|| (package.to_string(), rest))
}

/// `name==version` with a PyPI name and one exact version: never extras,
/// a URL, a path or a range pip would also accept.
fn is_exact_pypi(spec: &str) -> bool {
    let Some((name, version)) = spec.split_once("==") else {
        return false;
    };
    let name_ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
    name_ok && super::is_exact_version(version, b".+!_-")
}

fn installed(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file()
}

/// Installs the PyPI package into a virtual environment of its own,
/// wheels only, unless the server's copy is there; the environment's
/// Python runs the script named after the package.
pub(super) async fn fetch(wanted: Wanted<'_>) -> Result<Program, Refusal> {
    let (server, package, dir) = (wanted.server, wanted.package, wanted.dir);
    let (name, _) = package.split_once("==").unwrap_or((package, ""));
    if !installed(dir) {
        tracing::info!(server_id = server, package, dir = %dir.display(), "installing the server's PyPI package (wheels only)");
        super::install(package, dir, installed, |staging| async move {
            let mut venv = tokio::process::Command::new(PYTHON);
            venv.args(["-m", "venv"]).arg(&staging);
            super::run("python3 -m venv", package, &mut venv).await?;
            let mut pip = tokio::process::Command::new(staging.join("bin/python"));
            pip.args([
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
                "--quiet",
                "--only-binary=:all:",
                package,
            ]);
            super::run("pip", package, &mut pip).await
        })
        .await?;
    }
    let script = dir.join("bin").join(name);
    if !script.is_file() {
        return Err(Refusal::Cannot(format!(
            "{package} was installed, but it has no executable named {name} (uvx runs the one named after the package)"
        )));
    }
    let python = dir.join("bin/python");
    let args = std::iter::once(script.display().to_string())
        .chain(wanted.rest)
        .collect();
    Ok((python.display().to_string(), args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uvx(args: &[&str]) -> StdioCommand {
        StdioCommand::of("uvx", args)
    }

    #[test]
    fn only_an_exact_package_is_fetched_apart() {
        let (package, rest) = uvx_package(&uvx(&[
            "--quiet",
            "mcp-server-time==2026.10.19",
            "--local-timezone",
            "UTC",
        ]))
        .unwrap();
        assert_eq!(package, "mcp-server-time==2026.10.19");
        assert_eq!(rest, ["--local-timezone", "UTC"]);
        assert!(uvx_package(&uvx(&["--with", "evil", "pkg==1.0"])).is_none());
        for not_one_version in [
            "pkg",
            "pkg>=1.0",
            "pkg==1.*",
            "pkg[extra]==1.0",
            "pkg @ https://evil.example/x.whl",
            "./pkg==1.0",
            "pkg==latest",
        ] {
            assert!(
                uvx_package(&uvx(&[not_one_version])).is_none(),
                "{not_one_version}"
            );
        }
    }
}
