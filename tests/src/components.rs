//! Guests built with the real toolchains, for the end-to-end tests:
//! [`python_agent`] builds a Python app with componentize-py and
//! [`js_agent`] a JavaScript or TypeScript module with componentize-js
//! (sdk-guest/js/build.mjs), both installed by scripts/setup.sh, against
//! wit/spear-agent.wit and the language's SDK. Builds take 15–25 s and are
//! not reproducible byte for byte, so each is kept in
//! `$HOME/.cache/spear/components` under the digest of what went into it
//! (the source, the SDK, the WIT, the toolchain's version).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::tasks::repo_file;

fn spear_cache() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/spear")
}

/// `what`, where scripts/setup.sh installs it.
fn installed(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// componentize-py, where scripts/setup.sh installs it.
fn componentize_py() -> PathBuf {
    let venv = std::env::var("SPEAR_VENV_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|_| spear_cache().join("venv-guest"));
    installed(venv.join("bin/componentize-py"))
}

/// The npm packages of the JavaScript toolchain (componentize-js, esbuild,
/// typescript).
pub fn js_toolchain() -> PathBuf {
    let modules = std::env::var("SPEAR_NPM_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|_| spear_cache().join("npm-guest"))
        .join("node_modules");
    installed(modules.join("@bytecodealliance/componentize-js/package.json"));
    modules
}

/// The cached build of `inputs` by `toolchain` named `name`, built by
/// `build` (given the path to write) when missing, copied into `into`.
fn cached(
    name: &str,
    inputs: &[PathBuf],
    toolchain: &str,
    into: &Path,
    build: impl FnOnce(&Path) -> Command,
) -> PathBuf {
    let mut digest = Sha256::new();
    for file in inputs {
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        digest.update(file.display().to_string());
        digest.update(bytes);
    }
    digest.update(toolchain);
    let key = hex::encode(digest.finalize());
    let cache = spear_cache().join("components");
    std::fs::create_dir_all(&cache).unwrap();
    let built = cache.join(format!("{name}-{}.wasm", &key[..16]));
    if !built.exists() {
        let partial = cache.join(format!("{name}-{}.partial", &key[..16]));
        let out = build(&partial).output().unwrap();
        assert!(
            out.status.success(),
            "{toolchain} {name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&partial, &built).unwrap();
    }
    let path = into.join(format!("{name}.wasm"));
    std::fs::copy(&built, &path).unwrap();
    path
}

/// The component of Python module `app` (its file `dir/app.py`), built
/// with the SDK, copied into `into` (a directory the node may load
/// modules from): its path there.
pub fn python_agent(dir: &Path, app: &str, into: &Path) -> PathBuf {
    let sdk = repo_file("sdk-guest/python");
    let wit = repo_file("wit");
    let inputs = [
        dir.join(format!("{app}.py")),
        sdk.join("spear_agent.py"),
        wit.join("spear-agent.wit"),
    ];
    cached(app, &inputs, "componentize-py 0.25.1", into, |out| {
        let mut command = Command::new(componentize_py());
        command
            .arg("-d")
            .arg(&wit)
            .args(["-w", "agent", "componentize", app, "-p"])
            .arg(dir)
            .arg("-p")
            .arg(&sdk)
            .arg("-o")
            .arg(out);
        command
    })
}

/// The component of the JavaScript or TypeScript module `source`, built
/// with the SDK by sdk-guest/js/build.mjs, copied into `into` as
/// `name.wasm`: its path there.
pub fn js_agent(source: &Path, name: &str, into: &Path) -> PathBuf {
    let sdk = repo_file("sdk-guest/js");
    let wit = repo_file("wit");
    let inputs = [
        source.to_path_buf(),
        sdk.join("spear-agent.js"),
        sdk.join("build.mjs"),
        wit.join("spear-agent.wit"),
    ];
    let modules = js_toolchain();
    cached(name, &inputs, "componentize-js 0.23.0", into, |out| {
        let mut command = Command::new("node");
        command
            .arg(sdk.join("build.mjs"))
            .arg(source)
            .arg(out)
            .arg(&wit)
            .arg(&modules);
        command
    })
}

/// A recording whose model calls the guest tool `tool` with `arguments`,
/// then answers with what it read.
pub fn calls_guest_tool(dir: &Path, tool: &str, arguments: &str) -> PathBuf {
    let recording = dir.join(format!("{tool}.json"));
    let turns = json!({"turns": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": tool, "arguments": arguments}}]},
        {"role": "assistant", "content": "the guest counted: {{last_tool_result}}"},
    ]});
    std::fs::write(&recording, turns.to_string()).unwrap();
    recording
}
