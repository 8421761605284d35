//! The guest side of a node, built in one place: the wasmtime runtime, the
//! module store, the [`Invoker`] that runs tasks, and the Invocation gRPC
//! service listening for SMS. Built only when the node has `--listen`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use super::{NodeConfig, NodeError};
use crate::connections::Connections;
use crate::heartbeat::Advert;
use crate::invoke::{
    service::InvocationService, ChatRuntime, FetchLimits, Invoker, InvokerDeps, LimitPolicy,
    ModuleStore,
};
use crate::llm::Backends;
use crate::node_policy::PolicyCell;
use crate::registry::RegistryHandle;
use crate::sms_link::SmsLink;
use crate::tools::Router;
use crate::trust::approvals::Approver;
use crate::trust::audit::AuditLog;
use crate::trust::NodeTrust;

/// What the guest side is built from.
pub struct GuestsDeps<'a> {
    pub config: &'a NodeConfig,
    pub listen: SocketAddr,
    pub node_id: &'a str,
    pub registry: &'a RegistryHandle,
    pub connections: &'a Connections,
    pub policy: &'a PolicyCell,
    /// Where tasks are fetched from.
    pub sms: &'a SmsLink,
    /// Certificates SMS revoked: the Invocation port refuses them.
    pub revoked: &'a spear_identity::DenyList,
    /// The node's audit log.
    pub audit: &'a AuditLog,
}

/// The running guest side.
pub struct Guests {
    pub invoker: Arc<Invoker>,
    /// Where the Invocation service is bound.
    pub addr: SocketAddr,
    /// What heartbeats tell SMS: the address to call, and run counters.
    pub advert: Advert,
    /// The Invocation service and the quota settler; end after draining
    /// at shutdown.
    pub server: JoinHandle<()>,
    /// How the node's fleet quotas fared, for its metrics.
    pub quotas: Arc<crate::quota::QuotaStats>,
    /// Model usage by task, principal and model, for its metrics.
    pub meters: Arc<crate::trust::meters::UsageMeters>,
}

/// Builds the runtime and invoker, binds the Invocation service and starts
/// serving it on the guests' own threads until `shutdown`: a run it starts
/// is already where guests run, so no start pays a hop between threads.
pub async fn build(
    deps: GuestsDeps<'_>,
    shutdown: watch::Receiver<bool>,
) -> Result<Guests, NodeError> {
    let runtime = Arc::new(
        crate::invoke::runtime(
            Some(deps.config.state_dir.join("compiled")),
            deps.config.file.guests.threads,
        )
        .map_err(|e| NodeError::Runtime(format!("{e:#}")))?,
    );
    let guest_threads = runtime.guest_handle();
    let quotas = crate::quota::NodeQuotas::new(deps.node_id, Arc::new(deps.sms.clone()));
    let quota_stats = Arc::clone(&quotas.stats);
    // Gives back what ended quota slices did not spend, until shutdown.
    let settle = quotas.clone().settle_until(shutdown.clone());
    let meters = Arc::new(crate::trust::meters::UsageMeters::default());
    let trust = NodeTrust {
        meters: Arc::clone(&meters),
        node_id: deps.node_id.to_string(),
        approvals: Some(Approver::new(deps.sms.clone())),
        audit: Some(deps.audit.clone()),
        quotas: Some(quotas),
    };
    let invoker = invoker(&deps, runtime, trust)?;
    let GuestsDeps {
        config,
        listen,
        revoked,
        ..
    } = deps;
    let listen_error = |cause| NodeError::Listen {
        addr: listen,
        cause,
    };
    let listener = std::net::TcpListener::bind(listen).map_err(listen_error)?;
    listener.set_nonblocking(true).map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    if !bound.ip().is_loopback() && config.tls.is_none() {
        if !config.insecure {
            return Err(NodeError::Insecure(bound));
        }
        if !config.join_token.is_set() {
            return Err(NodeError::InsecureWithoutJoinToken(
                "serve invocations",
                "SMS",
            ));
        }
    }
    let advertised = match &config.advertise {
        Some(addr) => addr.clone(),
        None if bound.ip().is_unspecified() => return Err(NodeError::Advertise(bound)),
        None => bound.to_string(),
    };
    let service = InvocationService::new(
        Arc::clone(&invoker),
        config.tls.is_some(),
        config.join_token.clone(),
        revoked.clone(),
    );
    // Registered with the guests' runtime, which serves it.
    let listener = {
        let _on_guest_threads = guest_threads.enter();
        tokio::net::TcpListener::from_std(listener).map_err(listen_error)?
    };
    let serve = crate::invoke::service::serve(listener, config.tls.clone(), service, shutdown);
    let server = guest_threads.spawn(async move {
        tokio::join!(serve, settle);
    });
    let advert = Advert {
        invoke_addr: advertised,
        runs: invoker.stats(),
        audit_head: None,
    };
    info!(addr = %bound, advertised = %advert.invoke_addr, "invocation service listening");
    Ok(Guests {
        invoker,
        addr: bound,
        advert,
        server,
        quotas: quota_stats,
        meters,
    })
}

/// The invoker: backends, module store, limits and policy, over `runtime`.
fn invoker(
    deps: &GuestsDeps<'_>,
    runtime: Arc<ChatRuntime>,
    trust: NodeTrust,
) -> Result<Arc<Invoker>, NodeError> {
    let config = deps.config;
    let backends = Arc::new(Backends::new(config.file.llm.clone(), |name| {
        std::env::var(name).ok()
    })?);
    let guests = &config.file.guests;
    let fetch = FetchLimits {
        max_bytes: guests.max_module_mb << 20,
        timeout: Duration::from_millis(guests.fetch_timeout_ms),
    };
    let modules = ModuleStore::new(config.state_dir.join("modules"), deps.policy.clone(), fetch)
        .map_err(NodeError::Modules)?;
    Ok(Arc::new(Invoker::new(InvokerDeps {
        node_id: deps.node_id.to_string(),
        runtime,
        router: Router::new(deps.connections.clone(), deps.registry.clone()).with_trust(trust),
        backends,
        modules,
        policy: deps.policy.clone(),
        limits: LimitPolicy::new(guests.limits.clone()),
        sms: deps.sms.clone(),
        max_running: guests.max_running,
        compile_timeout: Duration::from_millis(guests.compile_timeout_ms),
    })))
}
