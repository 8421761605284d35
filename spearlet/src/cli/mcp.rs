//! `spearlet mcp`: list and call the tools of any MCP server from this node,
//! either one from the node's registry or an ad-hoc command, so an operator
//! can test a server exactly as the node will run it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use spear_proto::v1::{ServerSpec, Transport};

use crate::mcp::{check_input_schema, render_result, McpClient, Timeouts};
use crate::persist::StateDir;

/// Pages of `tools/list` read at most.
const PAGE_CAP: usize = 100;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// List a server's tools (quarantined ones say why).
    ListTools(Target),
    /// Call one tool and print what a model would see.
    Call {
        #[command(flatten)]
        target: Target,
        /// The tool's name as the server spells it.
        #[arg(long)]
        tool: String,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Bytes of output shown at most.
        #[arg(long, default_value_t = 200_000)]
        max_output_bytes: usize,
    },
}

/// Which server: `--server ID --state-dir DIR` from the node's registry, or
/// an ad-hoc command after `--`.
#[derive(Debug, Args)]
pub struct Target {
    /// A server id from the node's registry.
    #[arg(long, requires = "state_dir")]
    server: Option<String>,
    /// The node's state dir (for --server).
    #[arg(long, env = "SPEARLET_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Environment for an ad-hoc server, NAME=VALUE (repeatable); values may
    /// be ${REFERENCES} to this shell's environment.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// An ad-hoc remote server (Streamable HTTP) at this URL.
    #[arg(long, conflicts_with = "server")]
    url: Option<String>,
    /// The --url server speaks the legacy HTTP+SSE transport (2024-11-05).
    #[arg(long, requires = "url")]
    sse: bool,
    /// A header for an ad-hoc remote server, NAME=VALUE (repeatable); values
    /// may be ${REFERENCES} to this shell's environment.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    header: Vec<String>,
    /// Per-request timeout in milliseconds (overrides the server's own).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// An ad-hoc stdio server: the command and its arguments.
    #[arg(last = true)]
    command: Vec<String>,
}

impl Target {
    fn spec(&self) -> Result<ServerSpec> {
        if let Some(url) = &self.url {
            if !self.command.is_empty() {
                bail!("give either --url or a command after --, not both");
            }
            let mut headers = std::collections::HashMap::new();
            for pair in &self.header {
                let (name, value) = pair.split_once('=').with_context(|| format!("--header {pair}: expected NAME=VALUE"))?;
                headers.insert(name.to_string(), value.to_string());
            }
            return Ok(ServerSpec {
                id: "adhoc".into(),
                transport: if self.sse { Transport::Sse as i32 } else { Transport::StreamableHttp as i32 },
                url: url.clone(),
                headers,
                enabled: true,
                ..Default::default()
            });
        }
        match (&self.server, self.command.split_first()) {
            (Some(id), None) => {
                let dir = self.state_dir.as_ref().context("--server needs --state-dir")?;
                let view = StateDir::at(dir).load_registry();
                let record = view.servers.get(id).with_context(|| {
                    format!("server '{id}' is not in this node's registry ({} servers at revision {})", view.servers.len(), view.revision)
                })?;
                record.spec.clone().context("the registry entry has no spec")
            }
            (None, Some((program, args))) => {
                let mut env = std::collections::HashMap::new();
                for pair in &self.env {
                    let (name, value) = pair.split_once('=').with_context(|| format!("--env {pair}: expected NAME=VALUE"))?;
                    env.insert(name.to_string(), value.to_string());
                }
                Ok(ServerSpec {
                    id: "adhoc".into(),
                    transport: Transport::Stdio as i32,
                    command: program.clone(),
                    args: args.to_vec(),
                    env,
                    enabled: true,
                    ..Default::default()
                })
            }
            (Some(_), Some(_)) => bail!("give either --server or a command after --, not both"),
            (None, None) => bail!("say which server: --server ID --state-dir DIR, --url URL, or -- COMMAND ARGS..."),
        }
    }

    fn timeouts(&self, spec: &ServerSpec) -> Timeouts {
        let mut t = Timeouts::for_spec(spec);
        if let Some(ms) = self.timeout_ms {
            t.list_tools = Duration::from_millis(ms);
            t.call = Duration::from_millis(ms);
        }
        t
    }
}

fn lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Runs one `spearlet mcp` command; returns the exit code.
pub async fn run(command: McpCommand) -> Result<i32> {
    match command {
        McpCommand::ListTools(target) => {
            let spec = target.spec()?;
            let timeouts = target.timeouts(&spec);
            let client = McpClient::connect(&spec, &lookup).await.with_context(|| format!("server '{}'", spec.id))?;
            let tools = client.list_tools(PAGE_CAP, timeouts.list_tools).await;
            client.shutdown().await;
            let tools = tools.with_context(|| format!("listing the tools of '{}'", spec.id))?;
            for tool in &tools {
                let description = tool.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
                match check_input_schema(&tool.input_schema) {
                    Ok(()) => println!("{:<32} {description}", tool.name),
                    Err(why) => println!("{:<32} QUARANTINED: {why}", tool.name),
                }
            }
            Ok(0)
        }
        McpCommand::Call { target, tool, args, max_output_bytes } => {
            let spec = target.spec()?;
            let timeouts = target.timeouts(&spec);
            let arguments: serde_json::Value = serde_json::from_str(&args).context("--args is not valid JSON")?;
            let serde_json::Value::Object(arguments) = arguments else {
                bail!("--args must be a JSON object");
            };
            let client = McpClient::connect(&spec, &lookup).await.with_context(|| format!("server '{}'", spec.id))?;
            let result = client.call_tool(&tool, Some(arguments), timeouts.call).await;
            client.shutdown().await;
            let result = result.with_context(|| format!("calling '{tool}' on '{}'", spec.id))?;
            let rendered = render_result(&result, max_output_bytes);
            println!("{}", rendered.text);
            Ok(if rendered.is_error { 1 } else { 0 })
        }
    }
}
