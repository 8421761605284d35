//! The `spearlet` command line: `spearlet run`, `spearlet explain`,
//! `spearlet registry` and `spearlet mcp`.

mod guest;
mod login;
mod mcp;
mod mcp_dir;
mod mcp_serve;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use spear_common::{safe_print, safe_println};
use spear_identity::{dial, Identity, TlsFlags};
use tracing::info;

use spear_common::{init_logging_redacted, shutdown_signal, Listen, LogFormat, Verbosity};

use crate::env_refs::redact_logged;

/// The node's logging: every line passes the live servers' redactors.
fn init_logging(
    format: LogFormat,
    verbosity: Verbosity,
) -> Result<(), spear_common::process::LoggingError> {
    init_logging_redacted(format, verbosity, redact_logged)
}

use crate::config::NodeFile;
use crate::node::{Node, NodeConfig};
use crate::persist::StateDir;
use crate::registry::{redacted_json, table};

/// The Spear node agent.
#[derive(Debug, Parser)]
#[command(name = "spearlet", version)]
pub struct Cli {
    /// More log lines from `explain` and `mcp` (-v: info, -vv: debug);
    /// `RUST_LOG` overrides. `run` logs at info.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// `spearlet run`'s flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// SMS addresses, comma separated; tried in turn.
    #[arg(long, env = "SPEARLET_SMS", value_delimiter = ',', required = true)]
    pub sms: Vec<String>,
    /// Where the node keeps its state (last good registry, applied log, node id).
    #[arg(long, env = "SPEARLET_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Node id [default: host name plus a random suffix, kept in the state dir].
    #[arg(long, env = "SPEARLET_NODE_ID")]
    pub node_id: Option<String>,
    /// Address for /registry, /status, /metrics and the probes (HTTPS
    /// with TLS; /registry and /status on loopback or to admins); "off"
    /// disables it.
    #[arg(
        long,
        env = "SPEARLET_METRICS_LISTEN",
        default_value = "127.0.0.1:9400"
    )]
    pub metrics_listen: Listen,
    /// Log format: human or json.
    #[arg(long, env = "SPEARLET_LOG_FORMAT", default_value = "human")]
    pub log_format: LogFormat,
    /// gRPC address of the Invocation service (tasks run here); "off" runs no guests.
    #[arg(long, env = "SPEARLET_LISTEN", default_value = "127.0.0.1:7400")]
    pub listen: Listen,
    /// The host:port SMS should call for invocations [default: the bound --listen address].
    #[arg(long, env = "SPEARLET_ADVERTISE")]
    pub advertise: Option<String>,
    /// The node's TOML config: LLM backends (keys from the environment) and guest capacity.
    #[arg(long, env = "SPEARLET_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Serve the Invocation port in plaintext beyond loopback (a network you trust).
    #[arg(long, env = "SPEARLET_INSECURE")]
    pub insecure: bool,
    /// File holding this node's join token (`sms nodes join-token NODE`;
    /// used once, for the node token kept in the state dir) or its node
    /// token: presented to SMS on plaintext, and asked of SMS on a
    /// plaintext Invocation port. Needed with --insecure.
    #[arg(long, env = "SPEARLET_JOIN_TOKEN_FILE")]
    pub join_token_file: Option<PathBuf>,
    /// Seconds the node may serve its last good registry without SMS
    /// and still answer ready on /readyz.
    #[arg(long, env = "SPEARLET_STALE_AFTER_SECS", default_value_t = 60)]
    pub stale_after_secs: u64,
    /// On SIGTERM, seconds to let the runs in progress finish before
    /// stopping them (the node takes no new runs meanwhile).
    #[arg(long, env = "SPEARLET_DRAIN_SECS", default_value_t = 30)]
    pub drain_secs: u64,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the node: keep the registry in sync with SMS.
    Run(RunArgs),
    /// Why does (or doesn't) a session see a tool? Every server and tool with
    /// the layer and rule that decided.
    Explain {
        /// The task: a registered task id (fetched from --sms), or a task
        /// config file (JSON with an "mcp" object).
        #[arg(long)]
        task: String,
        /// SMS address, to fetch a registered task.
        #[arg(long, env = "SPEARLET_SMS", value_delimiter = ',')]
        sms: Vec<String>,
        #[command(flatten)]
        tls: TlsArgs,
        /// A node token file, for a plaintext SMS that asks for one
        /// [default: the state dir's node-token, kept at the node's join].
        #[arg(long, env = "SPEARLET_JOIN_TOKEN_FILE")]
        join_token_file: Option<PathBuf>,
        /// A session param write, KEY=JSON, as the guest would make it (repeatable).
        #[arg(long = "set", value_name = "KEY=JSON")]
        set: Vec<String>,
        /// The node's state dir (its registry).
        #[arg(long, env = "SPEARLET_STATE_DIR")]
        state_dir: PathBuf,
        /// Do not connect to servers (no tool verdicts, no health).
        #[arg(long)]
        no_connect: bool,
        #[arg(long)]
        json: bool,
    },
    /// Talk to an MCP server as this node would: list its tools, call one.
    #[command(subcommand)]
    Mcp(Box<mcp::McpCommand>),
    /// Build an agent, or run one once as a node would, without a cluster.
    #[command(subcommand)]
    Guest(guest::GuestCommand),
    /// Check the chain of the audit records in the node's state dir;
    /// names the first gap or altered record. Exits 1 when it is not whole.
    AuditVerify {
        #[arg(long, env = "SPEARLET_STATE_DIR")]
        state_dir: PathBuf,
    },
    /// Show the registry this node holds (from its state dir).
    Registry {
        #[arg(long, env = "SPEARLET_STATE_DIR")]
        state_dir: PathBuf,
        /// JSON output (env and header values redacted).
        #[arg(long)]
        json: bool,
    },
}

/// The node's TLS material (re-read when the files change).
#[derive(Debug, Args, Default)]
pub struct TlsArgs {
    /// PEM CA bundle SMS's certificate must chain to.
    #[arg(long, env = "SPEARLET_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The node's PEM certificate (URI SAN spiffe://DOMAIN/node/ID).
    #[arg(long, env = "SPEARLET_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The node's PEM private key.
    #[arg(long, env = "SPEARLET_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    fn flags(&self) -> TlsFlags {
        TlsFlags {
            ca: self.tls_ca.clone(),
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
        }
    }
}

/// Runs the command line; returns the exit code.
pub async fn run(cli: Cli) -> Result<i32> {
    let command_logs = Verbosity::Command {
        verbose: cli.verbose,
    };
    match cli.command {
        Command::Explain {
            task,
            sms,
            tls,
            join_token_file,
            set,
            state_dir,
            no_connect,
            json,
        } => {
            init_logging(LogFormat::Human, command_logs)?;
            // The node's own token, kept in its state dir at its join.
            let stored = state_dir.join(crate::node::credential::NODE_TOKEN_FILE);
            let join = join_token_file
                .or_else(|| stored.exists().then_some(stored))
                .map(spear_identity::JoinToken::from_file)
                .transpose()?
                .unwrap_or_default();
            let task = task_config(&task, &sms, &tls, join).await?;
            explain(&task, &set, &state_dir, no_connect, json).await
        }
        Command::Mcp(command) => {
            init_logging(LogFormat::Human, command_logs)?;
            mcp::run(*command).await
        }
        Command::Guest(command) => {
            init_logging(LogFormat::Human, command_logs)?;
            guest::run(command).await
        }
        Command::AuditVerify { state_dir } => {
            let dir = state_dir.join("audit");
            if !dir.is_dir() {
                bail!(
                    "{} holds no audit log; is this the node's --state-dir (of a node that runs tasks)?",
                    state_dir.display()
                );
            }
            let report = crate::trust::audit::verify_dir(&dir)?;
            let from = report.first_seq.unwrap_or(0);
            match report.problem {
                None => {
                    safe_println!(
                        "node {}: {} records from {from}, chain whole",
                        report.node,
                        report.records
                    );
                    Ok(0)
                }
                Some(problem) => {
                    safe_println!("node {}: NOT WHOLE: {problem}", report.node);
                    Ok(1)
                }
            }
        }
        Command::Registry { state_dir, json } => {
            if !state_dir.exists() {
                bail!(
                    "state dir {} does not exist; is this the node's --state-dir?",
                    state_dir.display()
                );
            }
            let view = StateDir::at(&state_dir).load_registry();
            if json {
                spear_common::terminal::print_json(&serde_json::to_string_pretty(&redacted_json(
                    &view,
                ))?);
            } else {
                safe_print!("{}", table(&view));
            }
            Ok(0)
        }
        Command::Run(args) => run_node(args).await,
    }
}

/// The node's TLS identity: the files given, or with the CA alone and a
/// join token (`joining`: its file, the node id, SMS), the certificate
/// SMS's CA signs at the node's first start ([`crate::node::bootstrap`]).
async fn node_tls(
    tls: &TlsArgs,
    joining: (&Option<PathBuf>, Option<&str>, &[String]),
    state_dir: &std::path::Path,
) -> Result<Option<spear_identity::TlsIdentity>> {
    let (join_file, node_id, sms) = joining;
    if let (Some(ca), None, None, Some(join)) =
        (&tls.tls_ca, &tls.tls_cert, &tls.tls_key, join_file)
    {
        let identity =
            crate::node::bootstrap::certificate(ca.clone(), join.clone(), state_dir, node_id, sms)
                .await?;
        return Ok(Some(identity));
    }
    Ok(tls
        .flags()
        .files()?
        .map(spear_identity::TlsIdentity::load)
        .transpose()?)
}

/// `spearlet run`: starts the node, serves until a signal, drains and
/// stops it.
async fn run_node(args: RunArgs) -> Result<i32> {
    let RunArgs {
        sms,
        state_dir,
        node_id,
        metrics_listen,
        log_format,
        listen,
        advertise,
        config,
        tls,
        insecure,
        join_token_file,
        stale_after_secs,
        drain_secs,
    } = args;
    init_logging(log_format, Verbosity::Daemon)?;
    let file = match &config {
        Some(path) => NodeFile::load(path)?,
        None => NodeFile::default(),
    };
    let sms: Vec<String> = sms
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let joining = (&join_token_file, node_id.as_deref(), &sms[..]);
    let tls = node_tls(&tls, joining, &state_dir).await?;
    let join_token = join_token_file
        .map(spear_identity::JoinToken::from_file)
        .transpose()?
        .unwrap_or_default();
    let node = Node::start(NodeConfig {
        sms,
        state_dir,
        node_id,
        http_listen: metrics_listen.addr(),
        invoke_listen: listen.addr(),
        advertise,
        file,
        config_path: config.clone(),
        tls,
        insecure,
        join_token,
        stale_after: std::time::Duration::from_secs(stale_after_secs),
    })
    .await?;
    info!(node_id = %node.node_id, http = ?node.http_addr, invoke = ?node.invoke_addr, "spearlet running");
    wait_for_shutdown(&node).await;
    node.drain(std::time::Duration::from_secs(drain_secs)).await;
    info!("shutting down");
    node.shutdown().await;
    spear_common::telemetry::shutdown();
    Ok(0)
}

/// Serves until SIGINT or SIGTERM; each SIGHUP meanwhile reloads the node
/// TOML, with a log line saying what changed or why nothing did.
async fn wait_for_shutdown(node: &Node) {
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    #[cfg(unix)]
    if let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = hangup.recv() => match node.reloader.reload() {
                    Ok(what) => info!("reloaded {what}"),
                    Err(error) => tracing::warn!(%error, "reload refused: the node keeps what it had"),
                },
            }
        }
    }
    shutdown.await;
}

/// The task policy to explain: from a config file, or from the task
/// registered in SMS under that id.
async fn task_config(
    task: &str,
    sms: &[String],
    tls: &TlsArgs,
    join: spear_identity::JoinToken,
) -> Result<crate::tool_policy::TaskPolicy> {
    let path = std::path::Path::new(task);
    if path.is_file() || task.contains('/') || task.ends_with(".json") {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read task config {}", path.display()))?;
        return crate::tool_policy::parse_task_config(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let Some(addr) = sms.first() else {
        bail!("--task {task} is not a file, and no --sms is given to fetch a registered task");
    };
    let tls = tls.flags().client()?;
    let (endpoint, dialer) = dial(addr, tls.as_ref(), Identity::Sms)?;
    let channel = dialer.connect(endpoint).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach SMS at {addr}: {}",
            spear_common::text::causes(&e)
        )
    })?;
    let spec = spear_proto::v1::tasks_client::TasksClient::with_interceptor(channel, join)
        .get_task(spear_proto::v1::GetTaskRequest {
            id: task.to_string(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    crate::tool_policy::parse_task_config(&spec.config_json)
        .map_err(|e| anyhow::anyhow!("task {task}: {e}"))
}

async fn explain(
    task: &crate::tool_policy::TaskPolicy,
    set: &[String],
    state_dir: &std::path::Path,
    no_connect: bool,
    json: bool,
) -> Result<i32> {
    let mut writes = Vec::new();
    for pair in set {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--set {pair}: expected KEY=JSON"))?;
        let value: serde_json::Value = serde_json::from_str(value)
            .with_context(|| format!("--set {key}: the value is not JSON"))?;
        writes.push((key.to_string(), value));
    }
    if !state_dir.exists() {
        bail!(
            "state dir {} does not exist; is this the node's --state-dir?",
            state_dir.display()
        );
    }
    let view = StateDir::at(state_dir).load_registry();
    let registry = crate::registry::RegistryHandle::new(view.clone());
    let lookup: crate::connections::Lookup =
        std::sync::Arc::new(|name: &str| Ok(std::env::var(name).ok()));
    // The servers start as on the node: in their sandbox.
    let options = crate::mcp::SessionOptions {
        sandbox: Some(crate::sandbox::Sandboxing::for_operator(Some(state_dir))),
        ..Default::default()
    };
    let connections = crate::connections::Connections::with_options(registry, lookup, options);
    let explanation =
        crate::tools::explain(task, &writes, &view, (!no_connect).then_some(&connections)).await;
    connections.shutdown().await;
    if json {
        spear_common::terminal::print_json(&serde_json::to_string_pretty(&explanation.to_json())?);
    } else {
        safe_print!("{}", explanation.to_text());
    }
    Ok(0)
}
