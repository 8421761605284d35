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

/// Writes `file` as `mcp.d/<id>.json` of `c`'s SMS and waits until its
/// node holds the server.
pub fn serve(c: &crate::tasks::Cluster, id: &str, file: &serde_json::Value) {
    write_file(
        &c.work.path().join("mcp.d"),
        &format!("{id}.json"),
        &file.to_string(),
    );
    crate::wait::eventually(
        "the server on the node",
        std::time::Duration::from_secs(30),
        || {
            let persisted = c.node.persisted_servers();
            persisted
                .iter()
                .any(|s| s == id)
                .then_some(())
                .ok_or(format!("{persisted:?}"))
        },
    );
}

/// A task config using the one server `id`, its model the `backend`.
pub fn one_server_task(id: &str, backend: &str) -> serde_json::Value {
    serde_json::json!({"mcp": {"enabled": true, "allowed_server_ids": [id], "default_server_ids": [id]},
                       "llm": {"backend": backend}, "limits": {"wall_ms": 60000}})
}

/// The plain cluster with one more backend, `once`, whose model calls
/// `tool` of `server` once ([`crate::tasks::calling_once`], written in `dir`).
pub fn once_cluster(dir: &Path, server: &str, tool: &str) -> crate::tasks::Cluster {
    let model = crate::tasks::calling_once(dir, server, tool);
    crate::tasks::cluster_opts(
        "unused",
        crate::tasks::ClusterOptions {
            models: vec![("once", model)],
            ..Default::default()
        },
    )
}
