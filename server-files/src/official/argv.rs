//! What a registry server.json may put on a runtime's command line: an
//! allow-list per runtime, so a file cannot make `docker run` privileged,
//! mount the host or join its network, give `npx` node options or another
//! package, or point `uvx` at another index (docs/server-files.md,
//! "What a server.json may pass"). Also the shapes identifiers and
//! environment names must have.

use super::unusable::Unusable;

/// The runtimes a package runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runtime {
    Npx,
    Uvx,
    Docker,
}

impl Runtime {
    fn name(self) -> &'static str {
        match self {
            Runtime::Npx => "npx",
            Runtime::Uvx => "uvx",
            Runtime::Docker => "docker",
        }
    }

    /// The flags a file may pass, and whether each takes a value.
    fn allowed(self) -> &'static [(&'static str, bool)] {
        match self {
            Runtime::Npx => &[
                ("-y", false),
                ("--yes", false),
                ("-q", false),
                ("--quiet", false),
            ],
            Runtime::Uvx => &[("-q", false), ("--quiet", false), ("--offline", false)],
            Runtime::Docker => &[
                ("-e", true),
                ("--env", true),
                ("-i", false),
                ("--interactive", false),
                ("--rm", false),
                ("--init", false),
                ("-w", true),
                ("--workdir", true),
            ],
        }
    }

    /// Flags the node writes itself, dropped when a file repeats them.
    fn own(self) -> &'static [&'static str] {
        match self {
            Runtime::Npx => &["-y", "--yes"],
            Runtime::Uvx => &[],
            Runtime::Docker => &["-i", "--interactive", "--rm"],
        }
    }
}

/// The runtime arguments of a file, checked against the runtime's
/// allow-list, without what the node writes itself (docker's `run`, `-i`,
/// `--rm`, and the image, which some files repeat here). `image` is the
/// package's image for docker.
pub(super) fn runtime_args(
    runtime: Runtime,
    argv: Vec<String>,
    image: &str,
) -> Result<Vec<String>, Unusable> {
    let allowed = runtime.allowed();
    let list = || {
        allowed
            .iter()
            .map(|(f, _)| *f)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    let mut tokens = argv.into_iter().peekable();
    while let Some(token) = tokens.next() {
        let (flag, inline) = match token.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f.to_string(), Some(v.to_string())),
            _ => (token.clone(), None),
        };
        if !flag.starts_with('-') {
            let repeated =
                runtime == Runtime::Docker && (token == "run" || same_image(&token, image));
            if repeated {
                continue;
            }
            return Err(Unusable::Positional {
                arg: token.escape_default().to_string(),
                runtime: runtime.name(),
            });
        }
        let Some((_, takes_value)) = allowed.iter().find(|(f, _)| *f == flag) else {
            return Err(Unusable::Flag {
                flag: flag.escape_default().to_string(),
                runtime: runtime.name(),
                allowed: list(),
            });
        };
        if *takes_value {
            let value = inline
                .or_else(|| tokens.next())
                .ok_or_else(|| Unusable::NoValue(flag.clone()))?;
            out.push(flag);
            out.push(value);
        } else {
            // A boolean option written with a value ("-i": "true").
            if tokens.peek().is_some_and(|v| v == "true" || v == "false") {
                if tokens.next().as_deref() == Some("false") {
                    continue;
                }
            }
            if !runtime.own().contains(&flag.as_str()) {
                out.push(flag);
            }
        }
    }
    Ok(out)
}

/// Whether `token` names the same image as `image` (`docker.io/` and the
/// tag aside).
fn same_image(token: &str, image: &str) -> bool {
    let bare = |s: &str| {
        let s = s.strip_prefix("docker.io/").unwrap_or(s);
        let s = s.split('@').next().unwrap_or(s);
        match s.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => name.to_string(),
            _ => s.to_string(),
        }
    };
    bare(token) == bare(image)
}

/// Why `identifier` is not an identifier of `registry`, if it is not:
/// never an option, a path, a URL or a spec its runtime would read as
/// something else.
pub(super) fn check_identifier(registry: &str, identifier: &str) -> Result<(), Unusable> {
    let refuse = |why: &str| {
        Err(Unusable::Identifier {
            identifier: identifier.escape_default().to_string(),
            why: why.to_string(),
        })
    };
    if identifier.starts_with('-') {
        return refuse("starts with '-', which its runtime would read as an option");
    }
    if identifier.contains("://")
        || identifier.contains("..")
        || identifier.starts_with(['/', '.', '~'])
    {
        return refuse("is a path or a URL, not a package of its registry");
    }
    let ok = |allowed: &dyn Fn(char) -> bool| identifier.chars().all(allowed);
    let shaped = match registry {
        "npm" => {
            let name = identifier.strip_prefix('@').unwrap_or(identifier);
            let parts = name.split('/').count();
            (parts == 1 || (parts == 2 && identifier.starts_with('@')))
                && ok(&|c| c.is_ascii_alphanumeric() || "-._~@/".contains(c))
        }
        "pypi" => ok(&|c| c.is_ascii_alphanumeric() || "-._".contains(c)),
        _ => ok(&|c| c.is_ascii_alphanumeric() || "-._/:@".contains(c)),
    };
    if shaped {
        Ok(())
    } else {
        refuse(&format!("is not the name of a {registry} package"))
    }
}

/// Environment names a runtime or the loader reads to change what runs.
const INTERPRETED: &[&str] = &[
    "LD_",
    "DYLD_",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "NPM_CONFIG_",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "UV_",
    "PIP_",
    "DOCKER_",
    "BASH_ENV",
    "ENV",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "PATH",
    "HOME",
];

/// Whether a runtime interprets variable `name` (matched case-blind;
/// entries ending in `_` are prefixes).
pub(super) fn interpreted(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    INTERPRETED.iter().any(|i| {
        if i.ends_with('_') {
            upper.starts_with(i)
        } else {
            upper == *i
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn escaping_runtime_arguments_are_refused_by_name() {
        for (runtime, bad) in [
            (Runtime::Docker, "--privileged"),
            (Runtime::Docker, "-v"),
            (Runtime::Docker, "--volume"),
            (Runtime::Docker, "--mount"),
            (Runtime::Docker, "--network"),
            (Runtime::Docker, "--pid"),
            (Runtime::Docker, "--ipc"),
            (Runtime::Docker, "--cap-add"),
            (Runtime::Docker, "--device"),
            (Runtime::Docker, "--security-opt"),
            (Runtime::Docker, "--user"),
            (Runtime::Docker, "--entrypoint"),
            (Runtime::Npx, "--node-options"),
            (Runtime::Npx, "--call"),
            (Runtime::Npx, "-c"),
            (Runtime::Npx, "--package"),
            (Runtime::Npx, "-p"),
            (Runtime::Uvx, "--with"),
            (Runtime::Uvx, "--index-url"),
            (Runtime::Uvx, "--extra-index-url"),
            (Runtime::Uvx, "--from"),
            (Runtime::Uvx, "--python"),
        ] {
            for form in [args(&[bad, "x"]), args(&[&format!("{bad}=x")])] {
                let refused = runtime_args(runtime, form, "img").unwrap_err().to_string();
                assert!(refused.contains(&format!("'{bad}'")), "{refused}");
            }
        }
    }

    #[test]
    fn what_real_files_write_is_kept_or_dropped() {
        let kept = runtime_args(
            Runtime::Docker,
            args(&[
                "run",
                "--rm",
                "-i",
                "true",
                "-e",
                "A=1",
                "--env=B",
                "hashicorp/x:0.3.2",
            ]),
            "docker.io/hashicorp/x:0.3.2",
        )
        .unwrap();
        assert_eq!(kept, args(&["-e", "A=1", "--env", "B"]));
        assert!(runtime_args(Runtime::Docker, args(&["other/image"]), "img").is_err());
        assert_eq!(
            runtime_args(Runtime::Npx, args(&["-y"]), "").unwrap(),
            args(&[])
        );
    }

    #[test]
    fn identifiers_look_like_their_registry() {
        for (registry, good) in [
            ("npm", "@scope/pkg"),
            ("npm", "pkg"),
            ("pypi", "mcp_redis"),
            ("oci", "ghcr.io/o/i:1.0"),
        ] {
            assert!(check_identifier(registry, good).is_ok(), "{good}");
        }
        for (registry, bad) in [
            ("npm", "--eval=process.exit()"),
            ("npm", "../evil"),
            ("npm", "a/b/c"),
            ("npm", "https://evil/x.tgz"),
            ("pypi", "evil/../x"),
            ("pypi", "pkg[extra]"),
            ("oci", "-v"),
            ("oci", "/tmp/image"),
        ] {
            assert!(check_identifier(registry, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn runtime_variables_are_known() {
        for name in [
            "LD_PRELOAD",
            "NODE_OPTIONS",
            "PYTHONPATH",
            "UV_INDEX_URL",
            "npm_config_registry",
            "DYLD_INSERT_LIBRARIES",
        ] {
            assert!(interpreted(name), "{name}");
        }
        for name in ["GITHUB_TOKEN", "API_KEY", "ENVIRONMENT"] {
            assert!(!interpreted(name), "{name}");
        }
    }
}
