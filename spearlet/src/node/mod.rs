//! The node's composition root: [`Node::start`] checks what the node may
//! do (`checks.rs`), restores its registry (`restore.rs`), opens its one
//! link to SMS, builds its MCP connections (`connections.rs`) and guest
//! side (`guests.rs`) and its HTTP endpoint, then starts sync, the
//! persister, heartbeats and the revocation list (`Background::spawn`),
//! keeping a named handle for each; [`Node::shutdown`] stops them in a
//! stated order.

pub mod bootstrap;
mod checks;
mod connections;
pub mod credential;
mod guests;
mod persister;
mod reload;
mod restore;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use spear_identity::{DenyList, Identity, JoinToken, TlsIdentity};

use crate::config::NodeFile;
use crate::connections::Connections;
use crate::heartbeat::Advert;
use crate::http_endpoint::NodeView;
use crate::invoke::Invoker;
use crate::llm::Backends;
use crate::node_policy::{NodePolicy, PolicyCell, PolicyError};
use crate::persist::{PersistError, StateDir};
use crate::registry::RegistryHandle;
use crate::sms_link::SmsLink;
use crate::sync::{SyncConfig, SyncStatusCell, Syncer};
use crate::trust::audit::{resume, Shipper};
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
    /// The node's own token on plaintext (from `--join-token-file`, or
    /// the join it led to: [`credential::resolve`]): presented to SMS,
    /// and asked of SMS on the plaintext Invocation port.
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
    #[error(transparent)]
    Audit(#[from] crate::trust::audit::OpenError),
    #[error(transparent)]
    Credential(#[from] credential::CredentialError),
    #[error(
        "the invocation service listens on {0}, which SMS cannot call; pass --advertise host:port"
    )]
    Advertise(SocketAddr),
    #[error("the invocation service would listen on {0} without TLS; give --tls-ca, --tls-cert and --tls-key (see docs/security.md), listen on loopback, or pass --insecure on a network you trust")]
    Insecure(SocketAddr),
    #[error("the node would follow SMS at {0} without TLS, taking registry secrets in clear; give --tls-ca, --tls-cert and --tls-key (see docs/security.md), or pass --insecure on a network you trust")]
    InsecureSms(String),
    #[error("the node would {0} in plaintext beyond loopback without --join-token-file: anyone on the network could then speak as {1}; give it its own join token (`sms nodes join-token NODE`, see docs/security.md) or use TLS")]
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
    /// Renews the node's TLS session ticket (TLS only).
    tickets: Option<JoinHandle<()>>,
    invocation: Option<JoinHandle<()>>,
    /// Ships the audit log to SMS; stopped at shutdown (what it has not
    /// sent yet, it sends after the next start).
    audit_shipper: Option<JoinHandle<()>>,
    http: Option<JoinHandle<()>>,
}

/// The node's HTTP endpoint (`/status`, probes, metrics), when it has one.
async fn serve_http(
    view: NodeView,
    config: &NodeConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<Option<(SocketAddr, tokio::task::JoinHandle<()>)>, NodeError> {
    let Some(addr) = config.http_listen else {
        return Ok(None);
    };
    view.serve(addr, config.tls.clone(), shutdown)
        .await
        .map(Some)
        .map_err(|cause| NodeError::Listen { addr, cause })
}

impl Node {
    /// Checks what the node may do, then builds each subsystem from what
    /// the ones before it handed back, and starts the background tasks.
    pub async fn start(mut config: NodeConfig) -> Result<Node, NodeError> {
        let plaintext_sms = checks::transport(&config)?;
        let state = StateDir::open(&config.state_dir)?;
        let node_id = checks::node_id(&config, &state)?;
        let restored = restore::restore(&state);
        let registry = restored.registry.clone();
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
        credential::adopt(&mut config, &node_id).await?;
        let sms = SmsLink::new(
            config.sms.clone(),
            config.tls.clone(),
            config.join_token.clone(),
        );
        let audit = resume::open(&sms, &node_id, &config.state_dir.join("audit")).await?;
        let connections = connections::build(&registry, &policy, &sms, &node_id, &audit, &config);
        let revoked = spear_identity::DenyList::default();
        let guests = match config.invoke_listen {
            Some(listen) => {
                let deps = guests::GuestsDeps {
                    config: &config,
                    listen,
                    node_id: &node_id,
                    registry: &registry,
                    connections: &connections,
                    policy: &policy,
                    sms: &sms,
                    revoked: &revoked,
                    audit: &audit,
                };
                Some(guests::build(deps, shutdown_rx.clone()).await?)
            }
            None => None,
        };
        let invoke_addr = guests.as_ref().map(|g| g.addr);
        let insecure = checks::warn_if_insecure(&config, plaintext_sms.as_deref(), invoke_addr);
        let advert = Advert {
            audit_head: Some(audit.watch_synced()),
            ..guests
                .as_ref()
                .map(|g| g.advert.clone())
                .unwrap_or_default()
        };
        let view = NodeView {
            insecure,
            revoked: revoked.clone(),
            node_id: node_id.clone(),
            registry: registry.clone(),
            status: Arc::clone(&status),
            connections: connections.clone(),
            advert: advert.clone(),
            stale_after: config.stale_after,
            sms: sms.clone(),
            quotas: guests.as_ref().map(|g| Arc::clone(&g.quotas)),
            meters: guests.as_ref().map(|g| Arc::clone(&g.meters)),
        };
        let (http_addr, http_task) = serve_http(view, &config, shutdown_rx.clone())
            .await?
            .unzip();
        let background = Background {
            node_id: &node_id,
            sms: &sms,
            tls: config.tls.is_some(),
            restored,
            state,
            status: &status,
            connections: &connections,
            advert,
            revoked,
        };
        let (invoker, invocation) = match guests {
            Some(g) => (Some(g.invoker), Some(g.server)),
            None => (None, None),
        };
        let mut handles = background.spawn(invocation, http_task, shutdown_rx);
        handles.audit_shipper = Some(Shipper::spawn(audit, sms.clone(), node_id.clone()));
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
            tickets,
            invocation,
            audit_shipper,
            http,
        } = self.handles;
        if let Some(invocation) = invocation {
            let _ = invocation.await;
        }
        if let Some(shipper) = audit_shipper {
            shipper.abort();
        }
        let _ = sync.await;
        let _ = persister.await;
        let _ = heartbeat.await;
        if let Some(revocations) = revocations {
            let _ = revocations.await;
        }
        if let Some(tickets) = tickets {
            let _ = tickets.await;
        }
        if let Some(http) = http {
            let _ = http.await;
        }
    }
}

/// What the node's background tasks are started with.
struct Background<'a> {
    node_id: &'a str,
    sms: &'a SmsLink,
    /// Revocations are followed, and TLS session tickets renewed, only
    /// with TLS (on plaintext nobody has a certificate to revoke).
    tls: bool,
    restored: restore::Restored,
    state: StateDir,
    status: &'a Arc<SyncStatusCell>,
    connections: &'a Connections,
    advert: Advert,
    revoked: DenyList,
}

impl Background<'_> {
    /// Starts sync, the persister, heartbeats and the revocation list;
    /// the handles, with the guest side's and the HTTP endpoint's.
    fn spawn(
        self,
        invocation: Option<JoinHandle<()>>,
        http: Option<JoinHandle<()>>,
        shutdown: watch::Receiver<bool>,
    ) -> Handles {
        let registry = self.restored.registry;
        let sync = Syncer::new(
            SyncConfig {
                link: self.sms.clone(),
                node_id: self.node_id.to_string(),
                silence_timeout: crate::sync::SILENCE_TIMEOUT,
            },
            registry.clone(),
            Arc::clone(self.status),
            self.restored.applied_log,
        );
        let persister = persister::run(
            self.state,
            registry.clone(),
            self.restored.on_disk,
            shutdown.clone(),
        );
        let heartbeat = crate::heartbeat::run(
            self.node_id.to_string(),
            self.sms.clone(),
            self.advert,
            registry,
            Arc::clone(self.status),
            self.connections.clone(),
            shutdown.clone(),
        );
        let revocations = self.tls.then(|| {
            let follow =
                crate::revocations::follow(self.sms.clone(), self.revoked, shutdown.clone());
            tokio::spawn(follow)
        });
        let tickets = self.tls.then(|| {
            let renew = crate::sync::tickets::keep_fresh(self.sms.clone(), shutdown.clone());
            tokio::spawn(renew)
        });
        Handles {
            sync: tokio::spawn(sync.run(shutdown)),
            persister: tokio::spawn(persister),
            heartbeat: tokio::spawn(heartbeat),
            revocations,
            tickets,
            invocation,
            audit_shipper: None,
            http,
        }
    }
}
