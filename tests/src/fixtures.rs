//! Server files for tests.

use std::path::Path;

/// Writes a file the way config-management tools do: to a hidden temporary
/// name, then renamed into place.
pub fn write_file(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
    std::fs::rename(&tmp, dir.join(name)).unwrap_or_else(|e| panic!("rename to {name}: {e}"));
}

/// A native-shape stdio server.
pub fn stdio_server(id: &str, description: &str) -> String {
    serde_json::json!({
        "id": id,
        "description": description,
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-everything"],
    })
    .to_string()
}
