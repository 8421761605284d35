//! The node's composition root: [`Node::start`] builds each subsystem (the
//! registry and its persister, MCP connections, the guest side in
//! `guests.rs`, the HTTP endpoint, sync and heartbeats) and keeps a named
//! handle for each; [`Node::shutdown`] stops them in a stated order.

mod guests;
mod persister;
mod reload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use spear_identity::{Identity, JoinToken, TlsIdentity};

use crate::config::NodeFile;
use crate::connections::Connections;
use crate::heartbeat::Advert;
use crate::http_endpoint::NodeView;
use crate::invoke::Invoker;
use crate::llm::Backends;
use crate::mcp::SessionOptions;
use crate::node_policy::{NodePolicy, PolicyCell, PolicyError};
use crate::persist::{Applied, AppliedLog, PersistError, StateDir};
use crate::registry::RegistryHandle;
use crate::sms_tokens::SmsCredentials;
use crate::sync::{SyncConfig, SyncStatusCell, Syncer};
pub use reload::{ReloadError, Reloader};

/// Everything a node needs to start.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub sms: Vec<String>,
    pub state_dir: PathBuf,
    pub node_id: Option<String>,
    pub http_listen: Option<SocketAddr>,
    /// Where the Invocation gRPC service listens; `None` runs no guests.
    pub invoke_listen: Option<SocketAddr>,
    /// The address SMS should call, when it differs from the bound one
    /// (a wildcard or NATed listen address).
    pub advertise: Option<String>,
    /// The node's config file (LLM backends, guest capacity, policy).
    pub file: NodeFile,
    /// Where it was read from, to read again on SIGHUP.
    pub config_path: Option<PathBuf>,
    /// The node's certificate (`spiffe://<domain>/node/<id>`), key and CA
    /// bundle: mutual TLS to SMS and on the Invocation port.
    pub tls: Option<TlsIdentity>,
    /// Serve the Invocation port in plaintext beyond loopback anyway.
    pub insecure: bool,
    /// What the node presents to SMS on plaintext, and asks of SMS on its
    /// plaintext Invocation port (`--join-token-file`).
    pub join_token: JoinToken,
    /// How long the node may be away from SMS and still report ready.
    pub stale_after: std::time::Duration,
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    State(#[from] PersistError),
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("no SMS address given; pass --sms host:port[,host:port...]")]
    NoSms,
    #[error(transparent)]
    Backend(#[from] crate::llm::BackendError),
    #[error("cannot start the guest runtime: {0}")]
    Runtime(String),
    #[error("the node config's {0}")]
    Policy(#[from] PolicyError),
    #[error("cannot create the module store in the state dir: {0}")]
    Modules(std::io::Error),
    #[error(
        "the invocation service listens on {0}, which SMS cannot call; pass --advertise host:port"
    )]
    Advertise(SocketAddr),
    #[error("the invocation service would listen on {0} without TLS; give --tls-ca, --tls-cert and --tls-key (see docs/security.md), listen on loopback, or pass --insecure on a network you trust")]
    Insecure(SocketAddr),
    #[error("the node would follow SMS at {0} without TLS, taking registry secrets in clear; give --tls-ca, --tls-cert and --tls-key (see docs/security.md), or pass --insecure on a network you trust")]
    InsecureSms(String),
    #[error("the node would {0} in plaintext beyond loopback without --join-token-file: anyone on the network could then speak as {1}; give it the join token file SMS reads (see docs/security.md) or use TLS")]
    InsecureWithoutJoinToken(&'static str, &'static str),
    #[error("the node's certificate is {0}, not a node's (spiffe://<domain>/node/<id>); issue one with `sms certs issue DIR --node ID`")]
    NotNode(Identity),
    #[error("--node-id is '{given}' but the node's certificate is for node '{cert}'; drop --node-id or use the certificate for '{given}'")]
    IdMismatch { given: String, cert: String },
}

/// A running node.
pub struct Node {
    pub node_id: String,
    pub registry: RegistryHandle,
    /// The node's MCP connections, shared by every session.
    pub connections: Connections,
    pub status: Arc<SyncStatusCell>,
    pub http_addr: Option<SocketAddr>,
    /// The bound address of the Invocation service.
    pub invoke_addr: Option<SocketAddr>,
    pub invoker: Option<Arc<Invoker>>,
    /// Reads the node TOML again (SIGHUP).
    pub reloader: Reloader,
    shutdown: watch::Sender<bool>,
    handles: Handles,
}

/// The node's background tasks, by name, so shutdown can order them.
struct Handles {
    sync: JoinHandle<()>,
    persister: JoinHandle<()>,
    heartbeat: JoinHandle<()>,
    revocations: Option<JoinHandle<()>>,
    invocation: Option<JoinHandle<()>>,
    http: Option<JoinHandle<()>>,
}

impl Node {
    pub async fn start(config: NodeConfig) -> Result<Node, NodeError> {
        if config.sms.is_empty() {
            return Err(NodeError::NoSms);
        }
        let plaintext_sms = config
            .sms
            .iter()
            .find(|addr| !spear_common::insecure::is_loopback(addr));
        if let (None, Some(addr), false) = (&config.tls, plaintext_sms, config.insecure) {
            return Err(NodeError::InsecureSms(addr.clone()));
        }
        if config.tls.is_none() && plaintext_sms.is_some() && !config.join_token.is_set() {
            return Err(NodeError::InsecureWithoutJoinToken(
                "follow SMS",
                "this node",
            ));
        }
        let state = StateDir::open(&config.state_dir)?;
        // With TLS the certificate says who the node is.
        let cert_id = match config.tls.as_ref().and_then(TlsIdentity::identity) {
            Some((_, Identity::Node(id))) => Some(id),
            Some((_, other)) => return Err(NodeError::NotNode(other)),
            None => None,
        };
        let node_id = match (config.node_id.clone(), cert_id) {
            (Some(given), Some(cert)) if given != cert => {
                return Err(NodeError::IdMismatch { given, cert })
            }
            (_, Some(cert)) => cert,
            (Some(id), None) => id,
            (None, None) => state.node_id(default_node_id)?,
        };
        let initial = state.load_registry();
        // What is on disk now; the persister compares against this, not
        // against whatever the sync task may already have applied.
        let on_disk = initial.position();
        if initial.epoch != 0 {
            info!(
                epoch = initial.epoch,
                revision = initial.revision,
                servers = initial.servers.len(),
                "serving the persisted registry until SMS answers"
            );
        }
        // Every start says what it took up (`restored 0 0`: nothing), so
        // the log stays checkable across a crash that lost recent changes.
        let mut applied_log = AppliedLog::open(state.applied_log_file());
        let (epoch, revision) = on_disk;
        applied_log.append(&Applied::Restored { epoch, revision });
        let registry = RegistryHandle::new(initial);
        let status = Arc::new(SyncStatusCell::default());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let policy = PolicyCell::new(NodePolicy::build(
            &config.file.policy,
            &config.state_dir,
            Backends::key_vars(&config.file.llm),
        )?);
        let reloader = Reloader::new(
            config.config_path.clone(),
            config.state_dir.clone(),
            policy.clone(),
            config.file.clone(),
        );
        // Server files read only the variables the node policy allows.
        let env = policy.clone();
        let lookup: crate::connections::Lookup =
            Arc::new(move |name: &str| env.current().env.lookup(name));
        // Servers behind OAuth get their tokens from SMS.
        // HTTP servers only where the node policy lets them be reached.
        let egress = policy.egress();
        let guarded = crate::http_client::guarded_http_client(&egress);
        let options = SessionOptions {
            credentials: Some(Arc::new(SmsCredentials::new(
                Arc::clone(&status),
                config.tls.clone(),
                config.join_token.clone(),
            ))),
            egress: Some((egress, guarded)),
            ..SessionOptions::default()
        };
        let connections = Connections::with_options(registry.clone(), lookup, options);

        let revoked = spear_identity::DenyList::default();
        let guests = match config.invoke_listen {
            Some(listen) => Some(
                guests::build(
                    guests::GuestsDeps {
                        config: &config,
                        listen,
                        node_id: &node_id,
                        registry: &registry,
                        connections: &connections,
                        policy: &policy,
                        status: &status,
                        revoked: &revoked,
                    },
                    shutdown_rx.clone(),
                )
                .await?,
            ),
            None => None,
        };
        let (invoker, invoke_addr, invocation, advert) = match guests {
            Some(g) => (Some(g.invoker), Some(g.addr), Some(g.server), g.advert),
            None => (None, None, None, Advert::default()),
        };

        // Allowed (--insecure), but never quietly.
        let plaintext_invoke = invoke_addr.filter(|addr| !addr.ip().is_loopback());
        let insecure_because = match (&config.tls, plaintext_sms, plaintext_invoke) {
            (Some(_), ..) => None,
            (None, Some(sms), _) => Some(format!(
                "the node follows SMS at {sms} in plaintext (--insecure)"
            )),
            (None, None, Some(addr)) => Some(format!(
                "the node serves invocations in plaintext on {addr} (--insecure)"
            )),
            (None, None, None) => None,
        };
        let insecure = insecure_because.is_some();
        if let Some(what) = insecure_because {
            spear_common::insecure::warn_loudly(what);
        }
        let http = match config.http_listen {
            Some(addr) => {
                let view = NodeView {
                    insecure,
                    revoked: revoked.clone(),
                    node_id: node_id.clone(),
                    registry: registry.clone(),
                    status: Arc::clone(&status),
                    connections: connections.clone(),
                    advert: advert.clone(),
                    stale_after: config.stale_after,
                };
                Some(
                    view.serve(addr, config.tls.clone(), shutdown_rx.clone())
                        .await
                        .map_err(|cause| NodeError::Listen { addr, cause })?,
                )
            }
            None => None,
        };
        let (http_addr, http_task) = http.unzip();

        let sync = Syncer::new(
            SyncConfig {
                sms: config.sms.clone(),
                node_id: node_id.clone(),
                tls: config.tls.clone(),
                join_token: config.join_token.clone(),
                silence_timeout: Duration::from_secs(20),
                connect_timeout: Duration::from_secs(5),
            },
            registry.clone(),
            Arc::clone(&status),
            applied_log,
        );
        let handles = Handles {
            sync: tokio::spawn(sync.run(shutdown_rx.clone())),
            persister: tokio::spawn(persister::run(
                state,
                registry.clone(),
                on_disk,
                shutdown_rx.clone(),
            )),
            revocations: config.tls.clone().map(|tls| {
                tokio::spawn(crate::revocations::follow(
                    Arc::clone(&status),
                    tls,
                    revoked,
                    shutdown_rx.clone(),
                ))
            }),
            heartbeat: tokio::spawn(crate::heartbeat::run(
                node_id.clone(),
                config.tls.clone(),
                config.join_token.clone(),
                advert,
                registry.clone(),
                Arc::clone(&status),
                connections.clone(),
                shutdown_rx,
            )),
            invocation,
            http: http_task,
        };
        Ok(Node {
            node_id,
            registry,
            connections,
            status,
            http_addr,
            invoke_addr,
            invoker,
            reloader,
            shutdown,
            handles,
        })
    }

    /// Drains the node before a shutdown: it takes no more runs (the
    /// Invocation service refuses them, `/readyz` says so, and a heartbeat
    /// tells SMS at once to route elsewhere), and waits up to `grace` for
    /// the runs in progress to finish. Returns how many were still running
    /// when the grace ran out (0 when all finished).
    pub async fn drain(&self, grace: Duration) -> u32 {
        let Some(invoker) = &self.invoker else {
            return 0;
        };
        let runs = invoker.stats();
        runs.draining.send_replace(true);
        let running = runs.running.load(std::sync::atomic::Ordering::Acquire);
        info!(
            running,
            grace_secs = grace.as_secs(),
            "draining: taking no more runs, finishing those in progress"
        );
        match tokio::time::timeout(grace, runs.idle()).await {
            Ok(()) => {
                info!("drained: no run in progress");
                0
            }
            Err(_) => {
                let left = runs.running.load(std::sync::atomic::Ordering::Acquire);
                warn!(
                    left,
                    grace_secs = grace.as_secs(),
                    "the drain's grace period ran out; stopping the runs still in progress"
                );
                left
            }
        }
    }

    /// Stops the node in a fixed order: every task is told at once; then
    /// MCP connections close (a run still calling a tool fails fast), the
    /// invocation service drains, sync stops applying, the persister writes
    /// the final registry (after sync, so it is the last applied state),
    /// and heartbeats and the HTTP endpoint end.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        self.connections.shutdown().await;
        let Handles {
            sync,
            persister,
            heartbeat,
            revocations,
            invocation,
            http,
        } = self.handles;
        if let Some(invocation) = invocation {
            let _ = invocation.await;
        }
        let _ = sync.await;
        let _ = persister.await;
        let _ = heartbeat.await;
        if let Some(revocations) = revocations {
            let _ = revocations.await;
        }
        if let Some(http) = http {
            let _ = http.await;
        }
    }
}
fn default_node_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    let host = if host.is_empty() {
        "node".to_string()
    } else {
        host
    };
    format!("{host}-{:06x}", rand::random::<u32>() & 0xff_ffff)
}
