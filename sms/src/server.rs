//! Wiring: builds the store, hub, writer, directory watcher, gRPC services and
//! metrics endpoint from an [`SmsConfig`], and runs them until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use spear_identity::{
    incoming, server, Access, AdminToken, Deadlines, Identity, JoinToken, TlsIdentity,
};
use spear_proto::defaults;
use spear_proto::shared_registry::registry_server::RegistryServer;
use spear_proto::v1::admin_server::AdminServer;
use spear_proto::v1::credentials_server::CredentialsServer;
use spear_proto::v1::nodes_server::NodesServer;
use spear_proto::v1::revocations_server::RevocationsServer;
use spear_proto::v1::status_server::StatusServer;
use spear_proto::v1::tasks_server::TasksServer;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::admin::Admin;
use crate::files::{watch_dir, FileProblems, Reconciler};
use crate::grpc::{
    AdminService, CredentialsService, NodesService, RegistryService, RevocationsService,
    StatusService, TasksService,
};
use crate::metrics::Metrics;
use crate::nodes::{NodeTable, SharedNodes};
use crate::oauth::{Broker, EtcdVault, KeyError, MemoryVault, SealingKey, Vault};
use crate::revocations::{EtcdRevocations, MemoryRevocations, RevocationStore, Revocations};
use crate::sealed::Sealer;
use crate::store::{EtcdStore, EtcdStoreConfig, MemoryStore, RegistryStore, StoreError};
use crate::tasks::{EtcdTaskStore, Invoker, MemoryTaskStore, TaskStore};
use crate::watch::{Hub, HubConfig};
use crate::writer::RegistryWriter;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Where SMS keeps the registry.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// In this process; a restart starts a new epoch.
    Memory,
    /// Shared by every SMS replica pointed at the same etcd cluster.
    Etcd(EtcdStoreConfig),
}

/// Everything SMS needs to start, validated by the caller.
#[derive(Debug, Clone)]
pub struct SmsConfig {
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub mcp_dir: Option<PathBuf>,
    pub store: StoreConfig,
    /// Debug-printing it shows only whether one is set.
    pub admin_token: AdminToken,
    /// What nodes present on a plaintext port (`--join-token-file`), and
    /// SMS to nodes.
    pub join_token: JoinToken,
    /// SMS's certificate (`spiffe://<domain>/sms`), key and CA bundle:
    /// with it the port is mutual TLS and callers have identities.
    pub tls: Option<TlsIdentity>,
    /// Serve plaintext beyond loopback anyway (`--insecure`).
    pub insecure: bool,
    /// Watch streams one node identity may hold at once (TLS only).
    pub max_watches_per_node: usize,
    pub hub: HubConfig,
    /// The key OAuth credentials are sealed with (`--oauth-key-file`);
    /// without it SMS holds none.
    pub oauth_key_file: Option<PathBuf>,
}

/// Why SMS could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        addr: SocketAddr,
        cause: std::io::Error,
    },
    #[error("cannot watch the MCP server directory {dir}: {cause}")]
    WatchDir { dir: PathBuf, cause: notify::Error },
    #[error(
        "MCP server directory {0} does not exist or is not a directory; create it or fix --mcp-dir"
    )]
    NoDir(PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("SMS would listen on {0} without TLS; give --tls-ca, --tls-cert and --tls-key (see docs/security.md), listen on loopback, or pass --insecure on a network you trust")]
    Insecure(SocketAddr),
    #[error("SMS would serve plaintext beyond loopback on {0} without {1}: anyone who reaches the port could act as {2}; give {1} (see docs/security.md) or use TLS")]
    InsecureWithoutToken(SocketAddr, &'static str, &'static str),
    #[error("the certificate given to SMS is {0}, not spiffe://<domain>/sms; issue one with `sms certs issue DIR --sms NAME`")]
    NotSms(Identity),
    #[error(transparent)]
    OAuthKey(#[from] KeyError),
    #[error("this machine gave no randomness for SMS's sealing key; try again")]
    NoRandomness,
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// A started SMS: its parts, for tests and benchmarks that drive it
/// in-process, and the addresses it actually bound.
pub struct Sms {
    pub hub: Arc<Hub>,
    pub nodes: Arc<NodeTable>,
    pub problems: Arc<FileProblems>,
    pub grpc_addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    listener: TcpListener,
    tls: Option<TlsIdentity>,
    access: Access,
    services: Services,
    dir_task: Option<tokio::task::JoinHandle<()>>,
}

struct Services {
    registry: RegistryService,
    admin: AdminService,
    nodes: NodesService,
    status: StatusService,
    tasks: TasksService,
    credentials: CredentialsService,
    revocations: RevocationsService,
}

impl Sms {
    /// Connects the store, binds the ports and starts following the store
    /// and the directory. Serving starts with [`Sms::serve`].
    pub async fn start(config: SmsConfig) -> Result<Sms, StartError> {
        if config.tls.is_none() && !config.insecure && !config.listen.ip().is_loopback() {
            return Err(StartError::Insecure(config.listen));
        }
        if config.tls.is_none() && !config.listen.ip().is_loopback() {
            // Allowed by --insecure, but never anonymous: tokens stand in for
            // the certificates a plaintext port cannot check.
            if !config.join_token.is_set() {
                return Err(StartError::InsecureWithoutToken(
                    config.listen,
                    "--join-token-file",
                    "a node",
                ));
            }
            if !config.admin_token.is_set() {
                return Err(StartError::InsecureWithoutToken(
                    config.listen,
                    "--admin-token-file",
                    "an admin",
                ));
            }
        }
        if let Some((_, identity)) = config.tls.as_ref().and_then(TlsIdentity::identity) {
            if identity != Identity::Sms {
                return Err(StartError::NotSms(identity));
            }
        }
        let oauth_key = config
            .oauth_key_file
            .as_deref()
            .map(SealingKey::from_file)
            .transpose()?
            .map(Arc::new);
        // Literal values of server files are sealed with the same key; a
        // registry in memory may have one of its own (see `sealed`).
        let sealer = Sealer::new(match (&oauth_key, &config.store) {
            (Some(key), _) => Some(Arc::clone(key)),
            (None, StoreConfig::Memory) => Some(Arc::new(
                SealingKey::ephemeral().map_err(|_| StartError::NoRandomness)?,
            )),
            (None, StoreConfig::Etcd(_)) => None,
        });
        type Stores = (
            Arc<dyn RegistryStore>,
            Arc<dyn TaskStore>,
            Option<Arc<SharedNodes>>,
            Arc<dyn Vault>,
            Arc<dyn RevocationStore>,
        );
        let (store, tasks, shared, vault, revoked): Stores = match &config.store {
            StoreConfig::Memory => (
                Arc::new(MemoryStore::new()),
                Arc::new(MemoryTaskStore::default()),
                None,
                Arc::new(MemoryVault::default()),
                Arc::new(MemoryRevocations::default()),
            ),
            StoreConfig::Etcd(etcd) => {
                let store = EtcdStore::connect(etcd.clone()).await?;
                let tasks = EtcdTaskStore::new(store.client(), &etcd.prefix);
                let shared = SharedNodes::new(store.client(), &etcd.prefix);
                let vault = EtcdVault::new(store.client(), &etcd.prefix);
                let revoked = EtcdRevocations::new(store.client(), &etcd.prefix);
                (
                    Arc::new(store),
                    Arc::new(tasks),
                    Some(Arc::new(shared)),
                    Arc::new(vault),
                    Arc::new(revoked),
                )
            }
        };
        let hub = Hub::start(store, config.hub.clone());
        let writer = Arc::new(RegistryWriter::new(Arc::clone(&hub)));
        let nodes = Arc::new(NodeTable::default());
        let problems = Arc::new(FileProblems::default());

        let dir_task = match &config.mcp_dir {
            Some(dir) => {
                if !dir.is_dir() {
                    return Err(StartError::NoDir(dir.clone()));
                }
                let reconciler = Reconciler::new(
                    dir.clone(),
                    Arc::clone(&hub),
                    Arc::clone(&writer),
                    Arc::clone(&problems),
                    sealer.clone(),
                );
                let task = watch_dir(dir, reconciler, hub.subscribe()).map_err(|cause| {
                    StartError::WatchDir {
                        dir: dir.clone(),
                        cause,
                    }
                })?;
                Some(task)
            }
            None => {
                // No directory: nothing to load.
                problems.mark_loaded();
                None
            }
        };

        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|cause| StartError::Listen {
                    addr: config.listen,
                    cause,
                })?;
        let grpc_addr = listener.local_addr().map_err(|cause| StartError::Listen {
            addr: config.listen,
            cause,
        })?;

        // Allowed (--insecure), but never quietly.
        let insecure = config.tls.is_none() && !grpc_addr.ip().is_loopback();
        if insecure {
            spear_common::insecure::warn_loudly(format!(
                "SMS serves plaintext on {grpc_addr} (--insecure)"
            ));
        } else if config.tls.is_none() && !config.join_token.is_set() {
            warn!(
                "SMS serves plaintext on {grpc_addr} without --join-token-file: anyone on this machine can act as a node (fine for a laptop; see docs/security.md)"
            );
        }
        let metrics_addr = match config.metrics_listen {
            Some(addr) => {
                let metrics = Metrics::new(
                    Arc::clone(&hub),
                    Arc::clone(&nodes),
                    Arc::clone(&problems),
                    insecure,
                );
                Some(
                    metrics
                        .serve(addr, config.tls.clone())
                        .await
                        .map_err(|cause| StartError::Listen { addr, cause })?,
                )
            }
            None => None,
        };

        let revocations = Revocations::start(revoked).await;
        let access = Access::new(config.tls.is_some(), config.admin_token.clone())
            .with_join_token(config.join_token.clone())
            .with_deny_list(revocations.deny_list());
        let status = StatusService::new(
            Arc::clone(&hub),
            Arc::clone(&nodes),
            Arc::clone(&problems),
            access.clone(),
        )
        .insecure(insecure);
        let services = Services {
            registry: RegistryService::new(
                Arc::clone(&hub),
                access.clone(),
                config.max_watches_per_node,
            ),
            admin: AdminService::new(Arc::new(Admin::new(writer, sealer.clone())), access.clone()),
            tasks: TasksService::new(
                tasks,
                Arc::new(
                    Invoker::new(Arc::clone(&nodes), shared.clone(), config.tls.clone())
                        .with_join_token(config.join_token.clone()),
                ),
                access.clone(),
            ),
            nodes: NodesService::new(Arc::clone(&nodes), shared, Arc::clone(&hub), access.clone()),
            credentials: CredentialsService::new(
                Arc::new(Broker::new(vault, oauth_key, Arc::clone(&hub))),
                sealer,
                access.clone(),
            ),
            revocations: RevocationsService::new(revocations, access.clone()),
            status,
        };
        let tls = config.tls.is_some();
        info!(%grpc_addr, store = hub.store().kind(), tls, "SMS started");
        Ok(Sms {
            hub,
            nodes,
            problems,
            grpc_addr,
            metrics_addr,
            listener,
            tls: config.tls,
            access,
            services,
            dir_task,
        })
    }

    /// Serves gRPC until `shutdown` completes.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), StartError> {
        let (health_reporter, health_service) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<RegistryServer<RegistryService>>()
            .await;
        health_reporter
            .set_serving::<AdminServer<AdminService>>()
            .await;
        let Services {
            registry,
            admin,
            nodes,
            status,
            tasks,
            credentials,
            revocations,
        } = self.services;
        let hub = Arc::clone(&self.hub);
        let shutdown = async move {
            shutdown.await;
            // Watch streams never end by themselves: end them, or the
            // graceful shutdown would wait for them forever.
            hub.close();
        };
        // Each service decodes what its calls need and no more.
        // Every call has a deadline; the long ones theirs.
        let deadlines = Deadlines::new(
            Duration::from_secs(30),
            &[
                ("/spear.v1.Tasks/InvokeTask", defaults::RUN_ANSWER_WITHIN),
                (
                    "/spear.v1.Tasks/RegisterTask",
                    defaults::REGISTER_TASK_WITHIN,
                ),
                (
                    "/spear.v1.Credentials/GetAccessToken",
                    defaults::ACCESS_TOKEN_WITHIN,
                ),
            ],
        );
        let result = server()
            .layer(self.access.gate().with_deadlines(deadlines))
            .add_service(health_service)
            .add_service(RegistryServer::new(registry).max_decoding_message_size(64 * KIB))
            .add_service(AdminServer::new(admin).max_decoding_message_size(2 * MIB))
            .add_service(
                NodesServer::new(nodes).max_decoding_message_size(defaults::MAX_HEARTBEAT_BYTES),
            )
            .add_service(StatusServer::new(status).max_decoding_message_size(4 * KIB))
            .add_service(CredentialsServer::new(credentials).max_decoding_message_size(128 * KIB))
            .add_service(RevocationsServer::new(revocations).max_decoding_message_size(4 * KIB))
            .add_service(
                TasksServer::new(tasks)
                    .max_decoding_message_size(defaults::MAX_INVOKE_REQUEST_BYTES)
                    .max_encoding_message_size(defaults::MAX_INVOKE_RESPONSE_BYTES),
            )
            .serve_with_incoming_shutdown(incoming(self.listener, self.tls), shutdown)
            .await;
        if let Some(task) = self.dir_task {
            task.abort();
        }
        result.map_err(StartError::from)
    }
}
