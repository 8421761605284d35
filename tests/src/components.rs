//! Guests built as WebAssembly components with the real toolchains, for
//! the end-to-end tests: [`python_agent`] builds a Python app with
//! componentize-py (installed by scripts/setup.sh) against
//! wit/spear-agent.wit and the Python SDK in sdk-guest/python. Builds take
//! about 15 s and are not reproducible byte for byte, so each is kept in
//! `$HOME/.cache/spear/components` under the digest of what went into it
//! (the app, the SDK, the WIT, the toolchain's version).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::tasks::repo_file;

/// componentize-py, where scripts/setup.sh installs it.
fn componentize_py() -> PathBuf {
    let venv = std::env::var("SPEAR_VENV_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/spear/venv-guest")
        });
    let path = venv.join("bin/componentize-py");
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}

/// The component of Python module `app` (its file `dir/app.py`), built
/// with the SDK, copied into `into` (a directory the node may load
/// modules from): its path there.
pub fn python_agent(dir: &Path, app: &str, into: &Path) -> PathBuf {
    let sdk = repo_file("sdk-guest/python");
    let wit = repo_file("wit");
    let mut digest = Sha256::new();
    for file in [
        dir.join(format!("{app}.py")),
        sdk.join("spear_agent.py"),
        wit.join("spear-agent.wit"),
    ] {
        let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        digest.update(file.display().to_string());
        digest.update(bytes);
    }
    digest.update("componentize-py 0.25.1");
    let key = hex::encode(digest.finalize());
    let cache =
        PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/spear/components");
    std::fs::create_dir_all(&cache).unwrap();
    let built = cache.join(format!("{app}-{}.wasm", &key[..16]));
    if !built.exists() {
        let partial = cache.join(format!("{app}-{}.partial", &key[..16]));
        let out = Command::new(componentize_py())
            .arg("-d")
            .arg(&wit)
            .args(["-w", "agent", "componentize", app, "-p"])
            .arg(dir)
            .arg("-p")
            .arg(&sdk)
            .arg("-o")
            .arg(&partial)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "componentize-py {app}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&partial, &built).unwrap();
    }
    let path = into.join(format!("{app}.wasm"));
    std::fs::copy(&built, &path).unwrap();
    path
}
