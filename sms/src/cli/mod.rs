//! The `sms` command line: `sms [serve]`, `sms validate`, `sms status`,
//! `sms servers`, `sms apply`, `sms delete`, `sms tasks ...`, `sms invoke`,
//! `sms certs ...`, `sms nodes join-token`, `sms oauth ...`.

mod approvals;
mod audit;
mod audit_disputes;
mod certs;
mod client;
mod config;
mod etcd_flags;
mod module_kind;
mod nodes;
mod oauth;
mod pins;
mod tasks;
mod usage;
mod validate;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use config::ServeArgs;

/// SMS, the Spear control plane: serves the MCP server registry to spearlets.
#[derive(Debug, Parser)]
#[command(name = "sms", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Running without a subcommand is `sms serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run SMS (the default).
    Serve(Box<ServeArgs>),
    /// Check a directory of server files offline. Exit 0 when valid, 1 when not, 2 on usage errors.
    Validate {
        /// The directory to check.
        dir: PathBuf,
    },
    /// Show the registry revision, file problems and every node's applied revision and lag.
    Status(ClientArgs),
    /// List the registered servers.
    Servers(ClientArgs),
    /// Create or replace a server through the admin API from a native-shape JSON file.
    Apply {
        #[command(flatten)]
        client: ClientArgs,
        /// The JSON file (`-` for standard input).
        file: PathBuf,
    },
    /// Delete a server that was created through the admin API.
    Delete {
        #[command(flatten)]
        client: ClientArgs,
        /// The server id.
        id: String,
    },
    /// Register, list, show and delete tasks (guest modules with their config).
    #[command(subcommand)]
    Tasks(tasks::TasksCommand),
    /// Nodes' credentials: `join-token NODE` makes one node's one-time join token.
    #[command(subcommand)]
    Nodes(nodes::NodesCommand),
    /// Make a CA and issue certificates for SMS, nodes and admins.
    #[command(subcommand)]
    Certs(certs::CertsCommand),
    /// Tool definition pins: list, diff, approve, reject (docs/trust.md).
    #[command(subcommand)]
    Pins(pins::PinsCommand),
    /// Calls waiting for a person: list, show, approve, deny (docs/trust.md).
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// The nodes' audit records (filters, --json), or `verify` their chains.
    Audit(Box<audit::AuditArgs>),
    /// What runs used and cost (runs, model requests, tokens, tool calls,
    /// USD), totalled from the audit trail; filters and --json.
    Usage(Box<usage::UsageArgs>),
    /// Approvals, pin drift and new audit records as they happen, one JSON
    /// object per line (what the console shows live).
    Events(ClientArgs),
    /// OAuth credentials for servers behind OAuth: keygen, login, status, logout.
    #[command(subcommand)]
    Oauth(oauth::OAuthCommand),
    /// Run a task on a healthy node (or the one named) and print its output.
    /// The exit code is the guest's; 1 when the run was stopped.
    Invoke {
        #[command(flatten)]
        client: ClientArgs,
        /// The task id.
        task: String,
        /// The guest's standard input.
        #[arg(long, conflicts_with = "input_file")]
        input: Option<String>,
        /// Read the guest's standard input from a file (`-` for stdin).
        #[arg(long)]
        input_file: Option<PathBuf>,
        /// Run on this node (SMS picks one otherwise).
        #[arg(long, default_value = "")]
        node: String,
        /// Skip SMS: call this node's invocation address directly.
        #[arg(long)]
        node_addr: Option<String>,
        /// Invoke as a person or workload: their OpenID Connect ID or
        /// access token, as a ${REFERENCE} to this shell's environment (a
        /// literal would show in the process list). The task's "invokers"
        /// must list them; no admin credential is needed.
        #[arg(long, value_name = "${NAME}", conflicts_with = "node_addr")]
        principal_token: Option<String>,
    },
}

/// How client commands reach SMS.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// SMS gRPC address.
    #[arg(long, env = "SMS_ADDR", default_value = "127.0.0.1:7300")]
    pub addr: String,
    /// File holding the admin token, for admin calls when you have no admin
    /// certificate (SMS_ADMIN_TOKEN in the environment works too).
    #[arg(long, env = "SPEAR_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM CA bundle SMS's certificate must chain to (TLS).
    #[arg(long, env = "SPEAR_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Your PEM certificate (an admin's: spiffe://DOMAIN/admin/NAME).
    #[arg(long, env = "SPEAR_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Your PEM private key.
    #[arg(long, env = "SPEAR_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Send the admin token even in clear to an SMS beyond loopback
    /// (without --tls-ca). Anyone on the path can read it.
    #[arg(long)]
    pub insecure: bool,
}

/// Runs the command line; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        None => config::serve(cli.serve).await.map(|()| 0),
        Some(Command::Serve(args)) => config::serve(*args).await.map(|()| 0),
        Some(Command::Validate { dir }) => Ok(validate::run(&dir)),
        Some(Command::Status(args)) => client::status(&args).await.map(|()| 0),
        Some(Command::Servers(args)) => client::servers(&args).await.map(|()| 0),
        Some(Command::Apply { client, file }) => client::apply(&client, &file).await.map(|()| 0),
        Some(Command::Delete { client, id }) => client::delete(&client, &id).await.map(|()| 0),
        Some(Command::Tasks(command)) => tasks::run(command).await,
        Some(Command::Certs(command)) => certs::run(command).await,
        Some(Command::Nodes(command)) => nodes::run(command).await,
        Some(Command::Pins(command)) => pins::run(command).await,
        Some(Command::Approvals(command)) => approvals::run(command).await,
        Some(Command::Audit(args)) => audit::run(*args).await,
        Some(Command::Usage(args)) => usage::run(*args).await,
        Some(Command::Events(client)) => audit::follow(&client).await,
        Some(Command::Oauth(command)) => oauth::run(command).await,
        Some(Command::Invoke {
            client,
            task,
            input,
            input_file,
            node,
            node_addr,
            principal_token,
        }) => {
            let target = tasks::Target {
                node,
                node_addr,
                principal_token,
            };
            tasks::invoke(&client, task, input, input_file, target).await
        }
    }
}
