//! The MCP servers tests talk to: the npm reference servers (installed by
//! scripts/setup.sh) and the project's own misbehaving server.

use std::path::PathBuf;

/// An executable of an npm reference server, e.g. `mcp-server-everything`.
pub fn npm_bin(name: &str) -> PathBuf {
    let dir = std::env::var("SPEAR_NPM_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        PathBuf::from(home).join(".cache/spear/npm")
    });
    let path = dir.join("node_modules/.bin").join(name);
    assert!(path.exists(), "{} is missing; run scripts/setup.sh (it installs the npm reference servers)", path.display());
    path
}

/// The misbehaving stdio server (Python, standard library only).
pub fn misbehaving_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/misbehaving_server.py")
}
