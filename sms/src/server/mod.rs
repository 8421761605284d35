//! SMS's composition root: [`Sms::start`] checks what SMS may do
//! (`checks.rs`), loads its keys and connects its stores (`stores.rs`),
//! starts the hub and the directory watcher, binds its ports and builds
//! its gRPC services (`services.rs`); [`Sms::serve`] runs them until
//! shutdown.

mod checks;
mod services;
mod stores;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use spear_identity::{Access, AdminToken, Identity, JoinToken, TlsIdentity, ViewerToken};
use tokio::net::TcpListener;
use tracing::info;

use crate::files::{watch_dir, FileProblems, Reconciler};
use crate::metrics::Metrics;
use crate::nodes::NodeTable;
use crate::oauth::KeyError;
use crate::revocations::Revocations;
use crate::store::{EtcdStoreConfig, StoreError};
use crate::watch::{Hub, HubConfig};
use crate::writer::RegistryWriter;
use services::{Services, ServicesDeps};
use stores::{Keys, Stores};

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
    /// The secret every node's own token derives from, on a plaintext
    /// port (`--join-token-file`; never given to a node): SMS checks the
    /// tokens nodes present and presents each node its own.
    pub join_token: JoinToken,
    /// SMS's CA directory (`sms certs init`), when SMS signs the
    /// certificates nodes join for (`--ca-dir`).
    pub ca_dir: Option<PathBuf>,
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
    /// How long and how much of the nodes' audit records SMS keeps.
    pub audit_retention: crate::audit::Retention,
    /// The console's address (`--console-listen`); `None`: off.
    pub console_listen: Option<SocketAddr>,
    /// A read-only sign-in for the console (`--viewer-token-file`).
    pub viewer_token: ViewerToken,
    /// Where console uploads of modules go (`--module-dir`).
    pub module_dir: Option<PathBuf>,
    /// The OpenID Connect issuer people and workloads sign in at
    /// (`--oidc-issuer`); `None`: only admins invoke.
    pub oidc: Option<spear_identity::OidcConfig>,
    /// SMS as the issuer of its nodes' workload identity.
    pub workload: WorkloadConfig,
    /// The non-public addresses SMS's OAuth client may reach when a
    /// server's metadata names them (`--egress`).
    pub egress: spear_egress::EgressPolicy,
}

/// SMS's workload identity (`--workload-issuer`, `--workload-key-file`):
/// without an issuer, servers whose grant is token_exchange get no token.
#[derive(Debug, Clone, Default)]
pub struct WorkloadConfig {
    pub issuer: Option<String>,
    pub key_file: Option<PathBuf>,
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
    #[error("cannot reach the OpenID Connect issuer: {0}")]
    Oidc(String),
    #[error("cannot load the pending approvals: {0}")]
    Approvals(crate::approvals::ApprovalError),
    #[error("SMS would listen on {0} without TLS; give --tls-ca, --tls-cert and --tls-key (see docs/security.md), listen on loopback, or pass --insecure on a network you trust")]
    Insecure(SocketAddr),
    #[error("SMS would serve plaintext beyond loopback on {0} without {1}: anyone who reaches the port could act as {2}; give {1} (see docs/security.md) or use TLS")]
    InsecureWithoutToken(SocketAddr, &'static str, &'static str),
    #[error("the certificate given to SMS is {0}, not spiffe://<domain>/sms; issue one with `sms certs issue DIR --sms NAME`")]
    NotSms(Identity),
    #[error(transparent)]
    OAuthKey(#[from] KeyError),
    #[error(transparent)]
    Workload(#[from] crate::oauth::per_principal::WorkloadError),
    #[error("this machine gave no randomness for SMS's sealing key; try again")]
    NoRandomness,
    #[error(transparent)]
    Console(#[from] crate::console::ConsoleError),
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
    /// Where the console serves; `None` when it is off.
    pub console_addr: Option<SocketAddr>,
    listener: TcpListener,
    tls: Option<TlsIdentity>,
    access: Access,
    services: Services,
    dir_task: Option<tokio::task::JoinHandle<()>>,
}

impl Sms {
    /// Checks what SMS may do, connects the store, follows the directory,
    /// binds the ports and builds the services. Serving starts with
    /// [`Sms::serve`].
    pub async fn start(config: SmsConfig) -> Result<Sms, StartError> {
        checks::transport(&config)?;
        let keys = Keys::load(&config)?;
        let stores = Stores::connect(&config.store, config.audit_retention).await?;
        let hub = Hub::start(Arc::clone(&stores.registry), config.hub.clone());
        let writer = Arc::new(RegistryWriter::new(Arc::clone(&hub)));
        let nodes = Arc::new(NodeTable::default());
        let problems = Arc::new(FileProblems::default());
        let dir_task = follow_mcp_dir(&config, &hub, &writer, &problems, &keys)?;
        let listen_error = |cause| StartError::Listen {
            addr: config.listen,
            cause,
        };
        let listener = spear_identity::listen(config.listen)
            .await
            .map_err(listen_error)?;
        let grpc_addr = listener.local_addr().map_err(listen_error)?;
        let insecure = checks::warn_if_insecure(&config, grpc_addr);
        let metrics_addr = match config.metrics_listen {
            Some(addr) => {
                let metrics = Metrics::new(
                    Arc::clone(&hub),
                    Arc::clone(&nodes),
                    Arc::clone(&problems),
                    insecure,
                )
                .with_workload(keys.per_principal.clone());
                let bound = metrics.serve(addr, config.tls.clone()).await;
                Some(bound.map_err(|cause| StartError::Listen { addr, cause })?)
            }
            None => None,
        };
        let revocations = Revocations::start(Arc::clone(&stores.revoked)).await;
        let oidc = config
            .oidc
            .clone()
            .map(spear_identity::OidcVerifier::new)
            .transpose()
            .map_err(|e| StartError::Oidc(e.to_string()))?
            .map(Arc::new);
        let access = Access::new(config.tls.is_some(), config.admin_token.clone())
            .with_node_tokens(spear_identity::NodeTokens::new(config.join_token.clone()))
            .with_deny_list(revocations.deny_list());
        let services = Services::build(ServicesDeps {
            hub: Arc::clone(&hub),
            nodes: Arc::clone(&nodes),
            problems: Arc::clone(&problems),
            writer,
            stores,
            keys,
            revocations,
            access: access.clone(),
            tls: config.tls.clone(),
            join_token: config.join_token.clone(),
            ca_dir: config.ca_dir.clone(),
            max_watches_per_node: config.max_watches_per_node,
            egress: config.egress.clone(),
            insecure,
            oidc: oidc.clone(),
        });
        let console_addr = serve_console(&config, &services, &hub, &nodes, &problems, oidc).await?;
        let tls = config.tls.is_some();
        info!(%grpc_addr, store = hub.store().kind(), tls, "SMS started");
        Ok(Sms {
            hub,
            nodes,
            problems,
            grpc_addr,
            metrics_addr,
            console_addr,
            listener,
            tls: config.tls,
            access,
            services,
            dir_task,
        })
    }

    /// Serves gRPC until `shutdown` completes.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), StartError> {
        let hub = Arc::clone(&self.hub);
        let shutdown = async move {
            shutdown.await;
            // Watch streams never end by themselves: end them, or the
            // graceful shutdown would wait for them forever.
            hub.close();
        };
        let result = self
            .services
            .serve(&self.access, self.listener, self.tls, shutdown)
            .await;
        if let Some(task) = self.dir_task {
            task.abort();
        }
        result.map_err(StartError::from)
    }
}

/// Follows the MCP server directory `dir` into the registry.
/// Follows `--mcp-dir` when there is one (a task keeping the registry
/// to the directory), or marks the registry loaded when there is none.
fn follow_mcp_dir(
    config: &SmsConfig,
    hub: &Arc<Hub>,
    writer: &Arc<RegistryWriter>,
    problems: &Arc<FileProblems>,
    keys: &Keys,
) -> Result<Option<tokio::task::JoinHandle<()>>, StartError> {
    let Some(dir) = &config.mcp_dir else {
        // No directory: nothing to load.
        problems.mark_loaded();
        return Ok(None);
    };
    let reconciler = Reconciler::new(
        dir.clone(),
        Arc::clone(hub),
        Arc::clone(writer),
        Arc::clone(problems),
        keys.sealer.clone(),
    );
    follow_dir(dir, reconciler, hub).map(Some)
}

/// The console, when `--console-listen` asks for it: its bound address.
async fn serve_console(
    config: &SmsConfig,
    services: &Services,
    hub: &Arc<Hub>,
    nodes: &Arc<NodeTable>,
    problems: &Arc<FileProblems>,
    oidc: Option<Arc<spear_identity::OidcVerifier>>,
) -> Result<Option<std::net::SocketAddr>, StartError> {
    let Some(listen) = config.console_listen else {
        return Ok(None);
    };
    let console = crate::console::ConsoleConfig {
        listen,
        tls: config.tls.clone(),
        insecure: config.insecure,
        admin_token: config.admin_token.clone(),
        viewer_token: config.viewer_token.clone(),
        module_dir: config.module_dir.clone(),
    };
    let deps = crate::console::ConsoleDeps {
        api: services.console_api(),
        hub: Arc::clone(hub),
        nodes: Arc::clone(nodes),
        problems: Arc::clone(problems),
        oidc,
    };
    Ok(crate::console::Console::serve(console, deps).await?)
}

fn follow_dir(
    dir: &std::path::Path,
    reconciler: Reconciler,
    hub: &Hub,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    if !dir.is_dir() {
        return Err(StartError::NoDir(dir.to_path_buf()));
    }
    watch_dir(dir, reconciler, hub.subscribe()).map_err(|cause| StartError::WatchDir {
        dir: dir.to_path_buf(),
        cause,
    })
}
