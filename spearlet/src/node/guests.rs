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
    service::InvocationService, FetchLimits, Invoker, InvokerDeps, LimitPolicy, ModuleStore,
};
use crate::llm::Backends;
use crate::node_policy::PolicyCell;
use crate::registry::RegistryHandle;
use crate::sms_link::SmsLink;
use crate::tools::Router;

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
}

/// The running guest side.
pub struct Guests {
    pub invoker: Arc<Invoker>,
    /// Where the Invocation service is bound.
    pub addr: SocketAddr,
    /// What heartbeats tell SMS: the address to call, and run counters.
    pub advert: Advert,
    /// The Invocation service; ends after draining at shutdown.
    pub server: JoinHandle<()>,
}

/// Builds the runtime and invoker, binds the Invocation service and starts
/// serving it until `shutdown`.
pub async fn build(
    deps: GuestsDeps<'_>,
    shutdown: watch::Receiver<bool>,
) -> Result<Guests, NodeError> {
    let GuestsDeps {
        config,
        listen,
        node_id,
        registry,
        connections,
        policy,
        sms,
        revoked,
    } = deps;
    let backends = Arc::new(Backends::new(config.file.llm.clone(), |name| {
        std::env::var(name).ok()
    })?);
    let guests = &config.file.guests;
    let compiled = Some(config.state_dir.join("compiled"));
    let runtime = crate::invoke::runtime(compiled, guests.threads)
        .map_err(|e| NodeError::Runtime(format!("{e:#}")))?;
    let fetch = FetchLimits {
        max_bytes: guests.max_module_mb << 20,
        timeout: Duration::from_millis(guests.fetch_timeout_ms),
    };
    let modules = ModuleStore::new(config.state_dir.join("modules"), policy.clone(), fetch)
        .map_err(NodeError::Modules)?;
    let invoker = Arc::new(Invoker::new(InvokerDeps {
        node_id: node_id.to_string(),
        runtime: Arc::new(runtime),
        router: Router::new(connections.clone(), registry.clone()),
        backends,
        modules,
        policy: policy.clone(),
        limits: LimitPolicy::new(guests.limits.clone()),
        sms: sms.clone(),
        max_running: guests.max_running,
        compile_timeout: Duration::from_millis(guests.compile_timeout_ms),
    }));
    let listen_error = |cause| NodeError::Listen {
        addr: listen,
        cause,
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(listen_error)?;
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
    let server = tokio::spawn(crate::invoke::service::serve(
        listener,
        config.tls.clone(),
        InvocationService::new(
            Arc::clone(&invoker),
            config.tls.is_some(),
            config.join_token.clone(),
            revoked.clone(),
        ),
        shutdown,
    ));
    let advert = Advert {
        invoke_addr: advertised,
        runs: invoker.stats(),
    };
    info!(addr = %bound, advertised = %advert.invoke_addr, "invocation service listening");
    Ok(Guests {
        invoker,
        addr: bound,
        advert,
        server,
    })
}
