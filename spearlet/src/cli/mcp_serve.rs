//! `spearlet mcp serve --mcp-dir DIR`: the virtual servers of a directory
//! served to MCP clients on this machine, with no SMS: the directory's
//! servers started as a node starts them (in their sandboxes), every list
//! and call decided by the node's router ([`crate::northbound`]). Prints
//! one URL per virtual server, then serves until stopped.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use spear_common::{safe_eprintln, safe_println};

use crate::connections::{Connections, Lookup};
use crate::northbound::{serve, VirtualServer, VirtualTools};
use crate::registry::{RegistryHandle, RegistryView};
use crate::tools::Router;

/// `spearlet mcp serve`'s flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A directory of server and virtual server files, as SMS's --mcp-dir.
    #[arg(long)]
    pub mcp_dir: PathBuf,
    /// Where to listen: a loopback address (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7300")]
    pub listen: SocketAddr,
    /// Serve only this virtual server [default: every one].
    #[arg(long)]
    pub virtual_server: Option<String>,
}

/// Serves until interrupted; the exit code.
pub async fn run(args: ServeArgs) -> Result<i32> {
    let declared = super::mcp_dir::read(&args.mcp_dir)?;
    let mut wanted = declared.virtual_servers;
    if let Some(name) = &args.virtual_server {
        wanted.retain(|v| &v.name == name);
        if wanted.is_empty() {
            bail!(
                "{} declares no virtual server '{name}'",
                args.mcp_dir.display()
            );
        }
    }
    if wanted.is_empty() {
        bail!(
            "{} declares no virtual server: add a file with \"virtual_server\" and its \"offers\" (docs/virtual-servers.md)",
            args.mcp_dir.display()
        );
    }
    let state = tempfile::tempdir()?;
    let registry = RegistryHandle::new(RegistryView::from_specs(declared.servers));
    let options = crate::mcp::SessionOptions {
        sandbox: Some(crate::sandbox::Sandboxing::for_operator(Some(state.path()))),
        relay_sampling: true,
        ..Default::default()
    };
    let lookup: Lookup = Arc::new(|name: &str| Ok(std::env::var(name).ok()));
    let connections = Connections::with_options(registry.clone(), lookup, options);
    let router = Router::new(connections.clone(), registry.clone());
    let view = registry.current();
    let mut servers = Vec::with_capacity(wanted.len());
    for spec in wanted {
        for offer in spec
            .offers
            .iter()
            .filter(|o| !view.servers.contains_key(&o.server_id))
        {
            safe_eprintln!(
                "virtual server '{}' offers server '{}', which {} does not declare: none of its tools are offered",
                spec.name,
                offer.server_id,
                args.mcp_dir.display()
            );
        }
        servers.push(VirtualServer::new(VirtualTools::new(spec), router.clone()));
    }
    let names: Vec<String> = servers.iter().map(|s| s.name().to_string()).collect();
    let listening = serve(args.listen, servers).await?;
    for name in &names {
        safe_println!("{}", listening.url(name));
    }
    stopped().await;
    listening.shutdown().await;
    connections.shutdown().await;
    Ok(0)
}

/// Ctrl-C or SIGTERM.
async fn stopped() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
