//! Nine real MCP servers of twenty tools each (`tests/peers/catalog_server.py`,
//! Python SDK, stdio; the tools in `tests/peers/tool-catalog/catalog.json`)
//! behind a router, and a task allowing them all: the fleet tool search is
//! for. Shared by the tool-search tests and benchmark.

use std::sync::Arc;

use spear_proto::v1::{ServerSpec, Transport};
use spearlet::connections::Connections;
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::TaskPolicy;
use spearlet::tools::Router;

pub const SERVERS: [&str; 9] = [
    "files", "git", "tracker", "chat", "calendar", "database", "cloud", "browser", "mail",
];

/// The Python of the venv with the MCP SDK (`scripts/setup.sh` makes it):
/// `$SPEAR_VENV/bin/python`, else `~/.cache/spear/venv/bin/python`.
pub fn python_sdk() -> String {
    let venv = std::env::var("SPEAR_VENV").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        format!("{home}/.cache/spear/venv")
    });
    let python = format!("{venv}/bin/python");
    assert!(
        std::path::Path::new(&python).exists(),
        "{python} is missing: run scripts/setup.sh (it installs the Python MCP SDK)"
    );
    python
}

/// The router over the nine servers, and a task allowing them all, once
/// every server has connected and listed its tools: nine Python servers
/// starting at once on a loaded machine can outlast one connect timeout,
/// and a server that is not up yet is (rightly) left out of a tool set.
pub async fn catalog_fleet() -> (Router, TaskPolicy) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/catalog_server.py"
    );
    let python = python_sdk();
    let specs = SERVERS.iter().map(|id| ServerSpec {
        id: id.to_string(),
        transport: Transport::Stdio as i32,
        command: python.clone(),
        args: vec![script.into(), id.to_string()],
        enabled: true,
        ..Default::default()
    });
    let registry = RegistryHandle::new(RegistryView::from_specs(specs));
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    wait_until_listed(&connections).await;
    let ids: Vec<String> = SERVERS.iter().map(|s| s.to_string()).collect();
    let task = TaskPolicy {
        enabled: true,
        allowed_server_ids: ids.clone(),
        default_server_ids: ids,
        ..TaskPolicy::default()
    };
    (Router::new(connections, registry), task)
}

/// Waits until each server's catalog is listed (a server that failed to
/// start in time reconnects after its backoff), for at most three minutes.
async fn wait_until_listed(connections: &Connections) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(180);
    for id in SERVERS {
        loop {
            match connections.catalog(id).await {
                Ok(catalog) if !catalog.tools.is_empty() => break,
                outcome => {
                    let why = outcome.err().map(|e| e.to_string()).unwrap_or_default();
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "catalog server '{id}' never listed its tools: {why}"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
            }
        }
    }
}
