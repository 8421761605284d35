//! The `spearlet` command line: `spearlet run`, `spearlet registry` and
//! `spearlet mcp`.

mod mcp;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use tracing::info;

use crate::node::{Node, NodeConfig};
use crate::persist::StateDir;
use crate::registry::{redacted_json, table};

/// The Spear node agent.
#[derive(Debug, Parser)]
#[command(name = "spearlet", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the node: keep the registry in sync with SMS.
    Run {
        /// SMS addresses, comma separated; tried in turn.
        #[arg(long, env = "SPEARLET_SMS", value_delimiter = ',', required = true)]
        sms: Vec<String>,
        /// Where the node keeps its state (last good registry, applied log, node id).
        #[arg(long, env = "SPEARLET_STATE_DIR")]
        state_dir: PathBuf,
        /// Node id [default: host name plus a random suffix, kept in the state dir].
        #[arg(long, env = "SPEARLET_NODE_ID")]
        node_id: Option<String>,
        /// HTTP address for /registry, /status and /metrics; "off" disables it.
        #[arg(long, env = "SPEARLET_METRICS_LISTEN", default_value = "127.0.0.1:9400")]
        metrics_listen: String,
        /// Log format: human or json.
        #[arg(long, env = "SPEARLET_LOG_FORMAT", default_value = "human")]
        log_format: String,
    },
    /// Talk to an MCP server as this node would: list its tools, call one.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Show the registry this node holds (from its state dir).
    Registry {
        #[arg(long, env = "SPEARLET_STATE_DIR")]
        state_dir: PathBuf,
        /// JSON output (env and header values redacted).
        #[arg(long)]
        json: bool,
    },
}

fn init_logging(format: &str) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        "human" => builder.try_init(),
        "json" => builder.json().try_init(),
        other => bail!("log format '{other}' is not known; use human or json"),
    }
    .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// Runs the command line; returns the exit code.
pub async fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Mcp(command) => {
            init_logging("human")?;
            mcp::run(command).await
        }
        Command::Registry { state_dir, json } => {
            if !state_dir.exists() {
                bail!("state dir {} does not exist; is this the node's --state-dir?", state_dir.display());
            }
            let view = StateDir::at(&state_dir).load_registry();
            if json {
                println!("{}", serde_json::to_string_pretty(&redacted_json(&view))?);
            } else {
                print!("{}", table(&view));
            }
            Ok(0)
        }
        Command::Run { sms, state_dir, node_id, metrics_listen, log_format } => {
            init_logging(&log_format)?;
            let http_listen = if metrics_listen == "off" {
                None
            } else {
                Some(metrics_listen.parse::<SocketAddr>().with_context(|| format!("--metrics-listen '{metrics_listen}' is not host:port or off"))?)
            };
            let sms: Vec<String> = sms.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
            let node = Node::start(NodeConfig { sms, state_dir, node_id, http_listen }).await?;
            info!(node_id = %node.node_id, http = ?node.http_addr, "spearlet running");
            shutdown_signal().await;
            info!("shutting down");
            node.shutdown().await;
            Ok(0)
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
