//! `spearlet mcp`: list and call the tools of any MCP server from this node,
//! either one from the node's registry or an ad-hoc command, so an operator
//! can test a server exactly as the node will run it.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use spear_common::text::printable;
use spear_common::{safe_eprintln, safe_println};
use spear_proto::v1::{ServerSpec, Transport};

use std::sync::Arc;

use super::login::{allow_for_login, Login, OAuthFlags};
use crate::connections::{Connections, Lookup};
use crate::mcp::{ElicitationPolicy, SessionOptions, Timeouts};
use crate::persist::StateDir;
use crate::registry::{RegistryHandle, RegistryView};

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// List a server's tools (quarantined ones say why).
    ListTools {
        #[command(flatten)]
        target: Target,
        /// Print the tools as JSON, each definition exactly as the node
        /// holds it (its input schema verbatim), with those not offered
        /// and why.
        #[arg(long)]
        json: bool,
    },
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
        /// Bytes of output shown at most [default: the server's limit].
        #[arg(long)]
        max_output_bytes: Option<u64>,
        /// What to answer a server that asks for input during the call
        /// [default: the server's own policy, else decline].
        #[arg(long, value_enum)]
        elicitation: Option<ElicitationArg>,
    },
    /// Serve the virtual servers of a directory to MCP clients on this
    /// machine (docs/virtual-servers.md): prints each one's URL, then
    /// serves until stopped.
    Serve(super::mcp_serve::ServeArgs),
}

/// `--elicitation`: the server file's two policies, and asking here.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ElicitationArg {
    /// Decline every request.
    Decline,
    /// Accept with the defaults of the requested schema.
    AcceptDefaults,
    /// Ask on this terminal (decline when there is none).
    Prompt,
}

impl From<ElicitationArg> for ElicitationPolicy {
    fn from(value: ElicitationArg) -> Self {
        match value {
            ElicitationArg::Decline => ElicitationPolicy::Decline,
            ElicitationArg::AcceptDefaults => ElicitationPolicy::AcceptDefaults,
            ElicitationArg::Prompt => ElicitationPolicy::Prompt,
        }
    }
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
    #[command(flatten)]
    oauth: OAuthFlags,
    /// Run a stdio server unconfined, as this shell's user. By default it
    /// runs in the sandbox a node gives it (docs/security.md).
    #[arg(long)]
    no_sandbox: bool,
    /// An ad-hoc stdio server: the command and its arguments.
    #[arg(last = true)]
    command: Vec<String>,
}

impl Target {
    /// The pins of a `--server` from the node's registry: the command
    /// offers and calls exactly what the node would.
    fn pins(&self) -> Option<spear_proto::v1::ToolPins> {
        let (id, dir) = (self.server.as_ref()?, self.state_dir.as_ref()?);
        let view = StateDir::at(dir).load_registry();
        view.servers.get(id).and_then(|r| r.pins.clone())
    }

    fn spec(&self) -> Result<ServerSpec> {
        if let Some(url) = &self.url {
            if !self.command.is_empty() {
                bail!("give either --url or a command after --, not both");
            }
            let mut headers = std::collections::HashMap::new();
            for pair in &self.header {
                let (name, value) = pair
                    .split_once('=')
                    .with_context(|| format!("--header {pair}: expected NAME=VALUE"))?;
                headers.insert(name.to_string(), value.to_string());
            }
            return Ok(ServerSpec {
                id: "adhoc".into(),
                transport: if self.sse {
                    Transport::Sse as i32
                } else {
                    Transport::StreamableHttp as i32
                },
                url: url.clone(),
                headers,
                auth: self.oauth.spec(),
                enabled: true,
                ..Default::default()
            });
        }
        match (&self.server, self.command.split_first()) {
            (Some(id), None) => {
                let dir = self
                    .state_dir
                    .as_ref()
                    .context("--server needs --state-dir")?;
                let view = StateDir::at(dir).load_registry();
                let record = view.servers.get(id).with_context(|| {
                    format!(
                        "server '{id}' is not in this node's registry ({} servers at revision {})",
                        view.servers.len(),
                        view.revision
                    )
                })?;
                record
                    .spec
                    .clone()
                    .context("the registry entry has no spec")
            }
            (None, Some((program, args))) => {
                let mut env = std::collections::HashMap::new();
                for pair in &self.env {
                    let (name, value) = pair
                        .split_once('=')
                        .with_context(|| format!("--env {pair}: expected NAME=VALUE"))?;
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
            (None, None) => bail!(
                "say which server: --server ID --state-dir DIR, --url URL, or -- COMMAND ARGS..."
            ),
        }
    }

    /// The spec with this command's overrides applied.
    fn effective_spec(&self, max_output_bytes: Option<u64>) -> Result<ServerSpec> {
        let mut spec = self.spec()?;
        if self.url.is_none() && self.oauth.spec().is_some() {
            bail!("the OAuth flags describe an ad-hoc --url server; a registry server's file says its own \"auth\"");
        }
        allow_for_login(&mut spec);
        if let Some(ms) = self.timeout_ms {
            let ms = u32::try_from(ms).context("--timeout-ms is too large")?;
            let t = Timeouts::for_spec(&spec);
            spec.timeouts = Some(spear_proto::v1::Timeouts {
                startup_ms: t.startup.as_millis() as u32,
                list_tools_ms: ms,
                call_ms: ms,
                // The server's own bound if it has one, else derived
                // from the new timeout.
                call_max_ms: spec.timeouts.map_or(0, |t| t.call_max_ms),
                relist_ms: spec.timeouts.map_or(0, |t| t.relist_ms),
            });
        }
        if let Some(bytes) = max_output_bytes {
            let mut limits = spec.limits.unwrap_or_default();
            limits.max_output_bytes = bytes;
            spec.limits = Some(limits);
        }
        Ok(spec)
    }
}

/// The node's connection manager over a registry of just this server, so
/// the command behaves exactly as the node does (limits, quarantine,
/// rendering), with a login on this terminal if the server is behind OAuth.
async fn connections_for(
    spec: ServerSpec,
    target: &Target,
    mut options: SessionOptions,
) -> Result<Connections> {
    if let Some(login) = target.oauth.login(&spec).await? {
        options.credentials = Some(Arc::new(Login(login)));
    }
    if !target.no_sandbox {
        options.sandbox = Some(crate::sandbox::Sandboxing::for_operator(
            target.state_dir.as_deref(),
        ));
    }
    let id = spec.id.clone();
    let mut view = RegistryView::from_specs([spec]);
    if let Some(record) = view.servers.get_mut(&id) {
        Arc::make_mut(record).pins = target.pins();
    }
    let lookup: Lookup = Arc::new(|name: &str| Ok(std::env::var(name).ok()));
    Ok(Connections::with_options(
        RegistryHandle::new(view),
        lookup,
        options,
    ))
}

/// Why a server's catalog offers no such tool to call.
#[derive(Debug, thiserror::Error)]
enum NotOffered {
    #[error("the tool is quarantined: {0}")]
    Quarantined(String),
    #[error("{0}")]
    Held(String),
    #[error("the server has no tool of that name; it has: {0}")]
    Unknown(String),
}

/// Whether `catalog` has `tool` to call, or why not.
fn offered(
    catalog: &crate::connections::Catalog,
    server: &str,
    tool: &str,
) -> Result<(), NotOffered> {
    if catalog.tools.iter().any(|t| t.name == tool) {
        return Ok(());
    }
    if let Some(held) = catalog.held.get(tool) {
        return Err(NotOffered::Held(held.sentence(server, tool)));
    }
    if let Some(q) = catalog.quarantined.iter().find(|q| q.tool == tool) {
        return Err(NotOffered::Quarantined(q.why.clone()));
    }
    let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
    Err(NotOffered::Unknown(if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }))
}

/// `spearlet mcp list-tools`: the server's catalog as the node sees it.
async fn list_tools(target: Target, json: bool) -> Result<i32> {
    let spec = target.effective_spec(None)?;
    let id = spec.id.clone();
    let connections = connections_for(spec, &target, SessionOptions::default()).await?;
    let catalog = connections.catalog(&id).await;
    let status = connections.status().remove(&id);
    connections.shutdown().await;
    let catalog = catalog.with_context(|| format!("listing the tools of '{id}'"))?;
    if let Some(version) = status.as_ref().and_then(|s| s.protocol_version.as_ref()) {
        safe_eprintln!("{id}: MCP protocol {version}");
    }
    if let Some(sandbox) = status.as_ref().and_then(|s| s.sandbox.as_ref()) {
        safe_eprintln!("{id}: sandbox {}", sandbox.detail);
    }
    if json {
        spear_common::terminal::print_json(&catalog_json(&id, &catalog).to_string());
        return Ok(0);
    }
    // A server's names, descriptions and reasons, one row each: a newline
    // in one cannot start a row of its own (and the print escapes the rest).
    for tool in &catalog.tools {
        let description = tool
            .description
            .as_deref()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("");
        safe_println!("{:<32} {}", printable(&tool.name), printable(description));
    }
    for crate::connections::Quarantined { tool, why } in &catalog.quarantined {
        safe_println!("{:<32} QUARANTINED: {}", printable(tool), printable(why));
    }
    for (tool, held) in &catalog.held {
        let why = held.sentence(&id, tool);
        safe_println!("{:<32} HELD: {}", printable(tool), printable(&why));
    }
    Ok(0)
}

/// `--json`: the tools offered, each as the server listed it, and those
/// not offered with why (`quarantined`, `held`).
fn catalog_json(id: &str, catalog: &crate::connections::Catalog) -> serde_json::Value {
    let quarantined: Vec<_> = catalog
        .quarantined
        .iter()
        .map(|q| serde_json::json!({"tool": q.tool, "why": q.why}))
        .collect();
    let held: Vec<_> = catalog
        .held
        .iter()
        .map(|(tool, held)| serde_json::json!({"tool": tool, "why": held.sentence(id, tool)}))
        .collect();
    serde_json::json!({
        "server": id,
        "tools": catalog.tools,
        "quarantined": quarantined,
        "held": held,
    })
}

/// Runs one `spearlet mcp` command; returns the exit code.
pub async fn run(command: McpCommand) -> Result<i32> {
    match command {
        McpCommand::ListTools { target, json } => list_tools(target, json).await,
        McpCommand::Serve(args) => super::mcp_serve::run(args).await,
        McpCommand::Call {
            target,
            tool,
            args,
            max_output_bytes,
            elicitation,
        } => {
            let spec = target.effective_spec(max_output_bytes)?;
            let id = spec.id.clone();
            let arguments: serde_json::Value =
                serde_json::from_str(&args).context("--args is not valid JSON")?;
            let serde_json::Value::Object(arguments) = arguments else {
                bail!("--args must be a JSON object");
            };
            let options = SessionOptions {
                elicitation: elicitation.map(Into::into),
                ..SessionOptions::default()
            };
            let connections = connections_for(spec, &target, options).await?;
            // As on a node: only a tool of the server's catalog is called.
            let offered = connections
                .catalog(&id)
                .await
                .map(|c| offered(&c, &id, &tool));
            let result = match offered {
                Ok(Ok(())) => connections.call(&id, &tool, Some(arguments)).await,
                Ok(Err(why)) => {
                    connections.shutdown().await;
                    bail!("calling '{tool}' on '{id}': {why}");
                }
                Err(error) => Err(error),
            };
            connections.shutdown().await;
            let rendered = result.with_context(|| format!("calling '{tool}' on '{id}'"))?;
            safe_println!("{}", rendered.text);
            Ok(if rendered.is_error { 1 } else { 0 })
        }
    }
}
