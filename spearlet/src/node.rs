//! Wiring of a running node: registry sync, persistence, heartbeats and the
//! HTTP endpoint, stopped together on shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use spear_proto::auth::AdminToken;

use crate::config::NodeFile;
use crate::connections::Connections;
use crate::heartbeat::Advert;
use crate::http_endpoint::NodeView;
use crate::invoke::{
    service::InvocationService, FetchLimits, Invoker, InvokerDeps, LimitPolicy, ModuleStore,
};
use crate::llm::Backends;
use crate::node_policy::{NodePolicy, PolicyError};
use crate::persist::{AppliedLog, PersistError, StateDir};
use crate::registry::RegistryHandle;
use crate::sync::{SyncConfig, SyncStatusCell, Syncer};
use crate::tools::Router;
use crate::wasm::GuestRuntime;

/// Persist at most this often; the final state is always written.
const PERSIST_EVERY: Duration = Duration::from_millis(200);

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
    /// The node's config file (LLM backends, guest capacity).
    pub file: NodeFile,
    /// The installation's admin token: invocations must carry it when set.
    pub admin_token: AdminToken,
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    State(#[from] PersistError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
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
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Node {
    pub async fn start(config: NodeConfig) -> Result<Node, NodeError> {
        if config.sms.is_empty() {
            return Err(NodeError::NoSms);
        }
        let state = StateDir::open(&config.state_dir)?;
        let node_id = match config.node_id {
            Some(id) => id,
            None => state.node_id(default_node_id)?,
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
        let registry = RegistryHandle::new(initial);
        let status = Arc::new(SyncStatusCell::default());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let policy = Arc::new(NodePolicy::build(
            &config.file.policy,
            &config.state_dir,
            Backends::key_vars(&config.file.llm),
        )?);
        // Server files read only the variables the node policy allows.
        let env = Arc::clone(&policy);
        let lookup: crate::connections::Lookup = Arc::new(move |name: &str| env.env.lookup(name));
        let (connections, invalidation) = Connections::new(registry.clone(), lookup);

        let mut tasks = Vec::new();
        let (invoker, invoke_addr, advert) = match config.invoke_listen {
            Some(listen) => {
                let backends = Arc::new(Backends::new(config.file.llm.clone(), |name| {
                    std::env::var(name).ok()
                })?);
                let guests = &config.file.guests;
                let compiled = Some(config.state_dir.join("compiled"));
                let threads = guests
                    .threads
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
                let runtime = GuestRuntime::with_threads(compiled, threads)
                    .map_err(|e| NodeError::Runtime(format!("{e:#}")))?;
                let fetch = FetchLimits {
                    max_bytes: guests.max_module_mb << 20,
                    timeout: Duration::from_millis(guests.fetch_timeout_ms),
                };
                let modules = ModuleStore::new(
                    config.state_dir.join("modules"),
                    policy.modules.clone(),
                    fetch,
                )
                .map_err(NodeError::Modules)?;
                let invoker = Arc::new(Invoker::new(InvokerDeps {
                    node_id: node_id.clone(),
                    runtime: Arc::new(runtime),
                    router: Router::new(connections.clone(), registry.clone()),
                    backends,
                    modules,
                    policy: Arc::clone(&policy),
                    limits: LimitPolicy::new(guests.limits.clone()),
                    sync_status: Arc::clone(&status),
                    sms: config.sms.clone(),
                    max_running: guests.max_running,
                    compile_timeout: Duration::from_millis(guests.compile_timeout_ms),
                }));
                let listener = tokio::net::TcpListener::bind(listen)
                    .await
                    .map_err(|source| NodeError::Listen {
                        addr: listen,
                        source,
                    })?;
                let bound = listener.local_addr().map_err(|source| NodeError::Listen {
                    addr: listen,
                    source,
                })?;
                let advertised = match &config.advertise {
                    Some(addr) => addr.clone(),
                    None if bound.ip().is_unspecified() => return Err(NodeError::Advertise(bound)),
                    None => bound.to_string(),
                };
                if !bound.ip().is_loopback() && !config.admin_token.is_set() {
                    warn!(addr = %bound, "the invocation service listens beyond loopback without an admin token: anyone who can reach it can run tasks here; pass --admin-token (or SPEARLET_ADMIN_TOKEN)");
                }
                tasks.push(tokio::spawn(crate::invoke::service::serve(
                    listener,
                    InvocationService::new(Arc::clone(&invoker), config.admin_token.clone()),
                    shutdown_rx.clone(),
                )));
                let advert = Advert {
                    invoke_addr: advertised,
                    runs: invoker.stats(),
                };
                info!(addr = %bound, advertised = %advert.invoke_addr, "invocation service listening");
                (Some(invoker), Some(bound), advert)
            }
            None => (None, None, Advert::default()),
        };

        let http_addr = match config.http_listen {
            Some(addr) => {
                let view = NodeView {
                    node_id: node_id.clone(),
                    registry: registry.clone(),
                    status: Arc::clone(&status),
                    connections: connections.clone(),
                    advert: advert.clone(),
                };
                Some(
                    view.serve(addr)
                        .await
                        .map_err(|source| NodeError::Listen { addr, source })?,
                )
            }
            None => None,
        };

        let sync = Syncer::new(
            SyncConfig {
                sms: config.sms.clone(),
                node_id: node_id.clone(),
                silence_timeout: Duration::from_secs(20),
                connect_timeout: Duration::from_secs(5),
            },
            registry.clone(),
            Arc::clone(&status),
            AppliedLog::open(state.applied_log_file()),
        );
        tasks.extend([
            tokio::spawn(sync.run(shutdown_rx.clone())),
            tokio::spawn(persist(
                state,
                registry.clone(),
                on_disk,
                shutdown_rx.clone(),
            )),
            tokio::spawn(crate::heartbeat::run(
                node_id.clone(),
                advert,
                registry.clone(),
                Arc::clone(&status),
                connections.clone(),
                shutdown_rx,
            )),
            invalidation,
        ]);
        Ok(Node {
            node_id,
            registry,
            connections,
            status,
            http_addr,
            invoke_addr,
            invoker,
            shutdown,
            tasks,
        })
    }

    /// Stops every task, writing the final registry state first.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        self.connections.shutdown().await;
        let mut tasks = self.tasks;
        // The last task only watches the registry; it has no end of its own.
        if let Some(invalidation) = tasks.pop() {
            invalidation.abort();
        }
        for task in tasks {
            let _ = task.await;
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

/// Writes the registry to the state dir after changes, at most every
/// [`PERSIST_EVERY`], and once more at shutdown.
async fn persist(
    state: StateDir,
    registry: RegistryHandle,
    on_disk: (u64, u64),
    mut shutdown: watch::Receiver<bool>,
) {
    let mut changes = registry.subscribe();
    let mut saved = on_disk;
    loop {
        // A change applied before this task subscribed is caught here too.
        if registry.current().position() != saved {
            changes.mark_changed();
        }
        let stop = tokio::select! {
            changed = changes.changed() => changed.is_err(),
            _ = shutdown.changed() => true,
        };
        if !stop {
            tokio::time::sleep(PERSIST_EVERY).await;
        }
        let view = registry.current();
        if view.position() != saved {
            let writer = state.clone();
            let snapshot = Arc::clone(&view);
            match tokio::task::spawn_blocking(move || writer.save_registry(&snapshot)).await {
                Ok(Ok(())) => saved = view.position(),
                Ok(Err(error)) => {
                    warn!(%error, "cannot persist the registry; will retry on the next change")
                }
                Err(error) => warn!(%error, "persisting the registry failed"),
            }
        }
        if stop {
            return;
        }
    }
}
