//! `spearlet guest build SOURCE -o OUT.wasm`: an agent's source to the
//! module or component a node runs, the toolchain picked from the source
//! (docs/guest-guide.md): `.py` → componentize-py, `.js`/`.ts` →
//! componentize-js (sdk-guest/js/build.mjs), `.c` → clang for wasm32-wasi
//! with sdk-guest/c/spear.h, a Cargo project → cargo for wasm32-wasip1.
//!
//! The SDKs and the WIT world are compiled into this binary, so a build
//! uses the ones this node speaks, wherever the binary was installed; the
//! toolchains are where `scripts/setup.sh` installs them
//! (`$HOME/.cache/spear`, or `SPEAR_TOOLCHAINS`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use spear_common::safe_println;

/// What a build embeds, from the repository, as this node speaks it.
const WIT: &str = include_str!("../../../../wit/spear-agent.wit");
const PYTHON_SDK: &str = include_str!("../../../../sdk-guest/python/spear_agent.py");
const JS_SDK: &str = include_str!("../../../../sdk-guest/js/spear-agent.js");
const JS_TYPES: &str = include_str!("../../../../sdk-guest/js/spear-agent.d.ts");
const JS_BUILD: &str = include_str!("../../../../sdk-guest/js/build.mjs");
const C_SDK: &str = include_str!("../../../../sdk-guest/c/spear.h");

/// Why a build did not produce a module.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}: no such file or Cargo project")]
    Missing(PathBuf),
    #[error(
        "{0}: cannot tell its language; an agent is a .py, .js, .ts or .c file, or a Cargo project"
    )]
    Unknown(PathBuf),
    #[error("{what} is not installed ({looked}): {install}")]
    NoToolchain {
        what: &'static str,
        looked: String,
        install: &'static str,
    },
    #[error("{tool} failed on {source_file}:\n{output}")]
    Failed {
        tool: &'static str,
        source_file: PathBuf,
        output: String,
    },
    #[error("cargo built no wasm32-wasip1 binary from {0}: give the agent a [[bin]] or main.rs")]
    NoArtifact(PathBuf),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The languages `guest build` knows, from the source's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Python,
    JavaScript,
    C,
    Rust,
}

impl Language {
    fn of(source: &Path) -> Result<Language, BuildError> {
        if source.is_dir() || source.file_name().is_some_and(|n| n == "Cargo.toml") {
            return Ok(Language::Rust);
        }
        match source.extension().and_then(|e| e.to_str()) {
            Some("py") => Ok(Language::Python),
            Some("js" | "mjs" | "ts") => Ok(Language::JavaScript),
            Some("c") => Ok(Language::C),
            _ => Err(BuildError::Unknown(source.to_path_buf())),
        }
    }
}

/// Where `scripts/setup.sh` installs the toolchains.
fn toolchains() -> PathBuf {
    std::env::var_os("SPEAR_TOOLCHAINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/spear")
        })
}

const SETUP: &str = "run scripts/setup.sh, which installs it into $HOME/.cache/spear";

/// `path` if it exists, else what to install.
fn tool(what: &'static str, path: PathBuf, install: &'static str) -> Result<PathBuf, BuildError> {
    if path.exists() {
        return Ok(path);
    }
    Err(BuildError::NoToolchain {
        what,
        looked: path.display().to_string(),
        install,
    })
}

/// `program` on the PATH, else what to install.
fn on_path(program: &'static str, install: &'static str) -> Result<PathBuf, BuildError> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    });
    found.ok_or(BuildError::NoToolchain {
        what: program,
        looked: "not on the PATH".into(),
        install,
    })
}

/// Builds `source` into `out`; prints what was built.
pub fn build(source: &Path, out: &Path) -> Result<(), BuildError> {
    if !source.exists() {
        return Err(BuildError::Missing(source.to_path_buf()));
    }
    let language = Language::of(source)?;
    let started = Instant::now();
    let work = tempfile::tempdir()?;
    let wit = work.path().join("wit");
    std::fs::create_dir_all(&wit)?;
    std::fs::write(wit.join("spear-agent.wit"), WIT)?;
    let out_abs = absolute(out)?;
    match language {
        Language::Python => python(source, &out_abs, work.path(), &wit)?,
        Language::JavaScript => javascript(source, &out_abs, work.path(), &wit)?,
        Language::C => c(source, &out_abs, work.path())?,
        Language::Rust => rust(source, &out_abs)?,
    }
    let size = std::fs::metadata(&out_abs)?.len();
    let size = if size < 1 << 20 {
        format!("{} KiB", size.div_ceil(1024))
    } else {
        format!("{:.1} MiB", size as f64 / f64::from(1 << 20))
    };
    safe_println!(
        "built {} ({language:?}, {size}) in {:.1}s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir()?.join(path))
}

/// Runs `command`; its output is the error when it fails.
fn run(tool: &'static str, source: &Path, mut command: Command) -> Result<(), BuildError> {
    let output = command.output().map_err(|e| BuildError::Failed {
        tool,
        source_file: source.to_path_buf(),
        output: e.to_string(),
    })?;
    if output.status.success() {
        return Ok(());
    }
    let mut said = String::from_utf8_lossy(&output.stderr).into_owned();
    said.push_str(&String::from_utf8_lossy(&output.stdout));
    Err(BuildError::Failed {
        tool,
        source_file: source.to_path_buf(),
        output: spear_common::text::printable_lines(said.trim_end()).into_owned(),
    })
}

/// componentize-py: the app is the file's module, found beside the SDK.
fn python(source: &Path, out: &Path, work: &Path, wit: &Path) -> Result<(), BuildError> {
    let venv = std::env::var_os("SPEAR_VENV_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| toolchains().join("venv-guest"));
    let componentize = tool("componentize-py", venv.join("bin/componentize-py"), SETUP)?;
    std::fs::write(work.join("spear_agent.py"), PYTHON_SDK)?;
    let app = source
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| BuildError::Unknown(source.to_path_buf()))?;
    let dir = source.parent().filter(|p| !p.as_os_str().is_empty());
    let mut command = Command::new(componentize);
    command
        .arg("-d")
        .arg(wit)
        .args(["-w", "agent", "componentize", app, "-p"])
        .arg(dir.unwrap_or(Path::new(".")))
        .arg("-p")
        .arg(work)
        .arg("-o")
        .arg(out);
    run("componentize-py", source, command)
}

/// sdk-guest/js/build.mjs under Node.js, with the SDK beside it.
fn javascript(source: &Path, out: &Path, work: &Path, wit: &Path) -> Result<(), BuildError> {
    let node = on_path(
        "node",
        "install Node.js 20 or later (apt-get install nodejs npm)",
    )?;
    let modules = std::env::var_os("SPEAR_NPM_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| toolchains().join("npm-guest"))
        .join("node_modules");
    tool(
        "componentize-js",
        modules.join("@bytecodealliance/componentize-js/package.json"),
        SETUP,
    )?;
    let sdk = work.join("js");
    std::fs::create_dir_all(&sdk)?;
    std::fs::write(sdk.join("spear-agent.js"), JS_SDK)?;
    std::fs::write(sdk.join("spear-agent.d.ts"), JS_TYPES)?;
    std::fs::write(sdk.join("build.mjs"), JS_BUILD)?;
    let mut command = Command::new(node);
    command
        .arg(sdk.join("build.mjs"))
        .arg(source)
        .arg(out)
        .arg(wit)
        .arg(modules);
    run("componentize-js", source, command)
}

/// clang for wasm32-wasi with spear.h on the include path.
fn c(source: &Path, out: &Path, work: &Path) -> Result<(), BuildError> {
    let install =
        "apt-get install clang lld wasi-libc libclang-rt-dev-wasm32 (scripts/setup.sh does)";
    let clang = on_path("clang", install)?;
    on_path("wasm-ld", install)?;
    std::fs::write(work.join("spear.h"), C_SDK)?;
    let mut command = Command::new(clang);
    command
        .args([
            "--target=wasm32-wasi",
            "-O2",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Wl,--strip-debug",
            "-I",
        ])
        .arg(work)
        .arg(source)
        .arg("-o")
        .arg(out);
    run("clang", source, command)
}

/// cargo for wasm32-wasip1 (release): the project's binary.
fn rust(source: &Path, out: &Path) -> Result<(), BuildError> {
    let manifest = if source.is_dir() {
        source.join("Cargo.toml")
    } else {
        source.to_path_buf()
    };
    if !manifest.is_file() {
        return Err(BuildError::Missing(manifest));
    }
    let cargo = on_path(
        "cargo",
        "install Rust with rustup, then `rustup target add wasm32-wasip1`",
    )?;
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip1",
            "--message-format=json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(&manifest);
    let output = command.output()?;
    if !output.status.success() {
        return Err(BuildError::Failed {
            tool: "cargo",
            source_file: manifest,
            output: spear_common::text::printable_lines(
                String::from_utf8_lossy(&output.stderr).trim_end(),
            )
            .into_owned(),
        });
    }
    let built = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["kind"][0] == "bin")
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .next_back();
    let built = built.ok_or(BuildError::NoArtifact(manifest))?;
    std::fs::copy(built, out)?;
    Ok(())
}
