//! SMS-routed invocation: pick a healthy node, forward the request with the
//! task attached, return what the node answered.
//!
//! Healthy means alive (heartbeat within the TTL) and accepting invocations;
//! synced nodes come before nodes serving a stale registry, then nodes where
//! none of the task's MCP servers has failed, then the fewest runs in
//! progress (the node's last report plus what this SMS has sent it
//! since), with ties taken in turn. A node that cannot be reached, or is
//! full, is skipped for the next one; a node that ran the guest is never
//! asked twice.
//!
//! With TLS, SMS dials each node as itself (`spiffe://<domain>/sms`) and
//! accepts the node only if its certificate is that node's
//! (`spiffe://<domain>/node/<id>`): a heartbeat naming someone else's
//! address wins nothing. No token is ever sent to a node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use spear_identity::{dial, BadAddress, Identity, NodeTokens, TlsIdentity};
use spear_proto::defaults;
use spear_proto::v1::invocation_client::InvocationClient;
use spear_proto::v1::{ExplainRequest, ExplainResponse, InvokeRequest, InvokeResponse, TaskSpec};
use tonic::transport::Channel;
use tonic::Code;
use tracing::{info_span, warn, Instrument};

use crate::nodes::{Invocable, NodeTable, SharedNodes};
use crate::oauth::PerPrincipal;

/// Nodes tried per invocation before giving up.
const MAX_ATTEMPTS: usize = 3;

/// Why an invocation did not reach a node that ran it.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("no healthy node accepts invocations; start a spearlet (`spearlet run --sms ...`) or check `sms status`")]
    NoNode,
    #[error(
        "node '{0}' is not alive or does not accept invocations; `sms status` lists the nodes"
    )]
    NodeUnavailable(String),
    #[error("no node could take the task: {0}")]
    AllFailed(String),
    #[error("node '{node}' did not answer within {after:?} (the task's wall-clock limit plus a margin); it may be overloaded or stopped")]
    NoAnswer { node: String, after: Duration },
    /// The node refused the request itself (bad module, unknown backend...).
    #[error("{}", .0.message())]
    Refused(tonic::Status),
}

/// Routes invocations to nodes.
pub struct Invoker {
    nodes: Arc<NodeTable>,
    /// Nodes heartbeating to other SMS replicas (etcd), when shared.
    shared: Option<Arc<SharedNodes>>,
    /// SMS's own TLS identity, to dial nodes with.
    tls: Option<TlsIdentity>,
    /// Presented to nodes on plaintext, where no certificate says SMS.
    join: NodeTokens,
    /// By node id and address: a node that moves gets a new channel.
    channels: Mutex<HashMap<(String, String), Channel>>,
    in_flight: Mutex<HashMap<String, u32>>,
    turn: AtomicUsize,
    /// Seals a person's token into their runs, for servers that act per
    /// principal; `None`: no delegation is made.
    per_principal: Option<Arc<PerPrincipal>>,
}

/// Counts a forwarded run until it returns, however it returns.
struct InFlight<'a> {
    invoker: &'a Invoker,
    node_id: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.invoker.in_flight.lock();
        if let Some(n) = in_flight.get_mut(&self.node_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                in_flight.remove(&self.node_id);
            }
        }
    }
}

impl Invoker {
    pub fn new(
        nodes: Arc<NodeTable>,
        shared: Option<Arc<SharedNodes>>,
        tls: Option<TlsIdentity>,
    ) -> Self {
        Self {
            nodes,
            shared,
            tls,
            join: NodeTokens::default(),
            channels: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            turn: AtomicUsize::new(0),
            per_principal: None,
        }
    }

    /// Delegates a person's token to the node that runs their task.
    pub fn with_per_principal(mut self, per_principal: Option<Arc<PerPrincipal>>) -> Self {
        self.per_principal = per_principal;
        self
    }

    /// Presents each node its own token (their plaintext ports need it).
    pub fn with_node_tokens(mut self, join: NodeTokens) -> Self {
        self.join = join;
        self
    }

    /// This replica's nodes, then those only other replicas hear from.
    async fn candidates(&self) -> Vec<Invocable> {
        let mut nodes = self.nodes.invocable();
        if let Some(shared) = &self.shared {
            match tokio::time::timeout(Duration::from_secs(2), shared.invocable()).await {
                Ok(Ok(others)) => {
                    for node in others {
                        if !nodes.iter().any(|n| n.node_id == node.node_id) {
                            nodes.push(node);
                        }
                    }
                }
                Ok(Err(error)) => warn!(%error, "cannot read the nodes of other SMS replicas"),
                Err(_) => warn!("etcd did not list the nodes of other SMS replicas within 2 s"),
            }
        }
        nodes
    }

    /// The nodes to try, best first, for a task using `servers`.
    fn plan(
        &self,
        mut nodes: Vec<Invocable>,
        pinned: &str,
        servers: &[String],
    ) -> Result<Vec<Invocable>, InvokeError> {
        if !pinned.is_empty() {
            nodes.retain(|n| n.node_id == pinned);
            if nodes.is_empty() {
                return Err(InvokeError::NodeUnavailable(pinned.to_string()));
            }
        }
        if nodes.is_empty() {
            return Err(InvokeError::NoNode);
        }
        let len = nodes.len();
        nodes.rotate_left(self.turn.fetch_add(1, Ordering::Relaxed) % len);
        let in_flight = self.in_flight.lock();
        // A stable sort keeps the rotation among equals.
        nodes.sort_by_key(|n| {
            let load = n.running + in_flight.get(&n.node_id).copied().unwrap_or(0);
            let broken = n.failed_servers.iter().any(|s| servers.contains(s));
            (!n.synced, broken, load)
        });
        nodes.truncate(MAX_ATTEMPTS);
        Ok(nodes)
    }

    fn channel(&self, node: &Invocable) -> Result<Channel, BadAddress> {
        let key = (node.node_id.clone(), node.addr.clone());
        if let Some(channel) = self.channels.lock().get(&key) {
            return Ok(channel.clone());
        }
        let expect = Identity::Node(node.node_id.clone());
        let (endpoint, dialer) = dial(&node.addr, self.tls.as_ref(), expect)?;
        let channel = dialer.connect_lazy(endpoint.connect_timeout(Duration::from_secs(3)));
        self.channels.lock().insert(key, channel.clone());
        Ok(channel)
    }

    /// Runs `task` on a node chosen as described in the module docs;
    /// `token` is the person's verified token, delegated to that node for
    /// the run (see [`PerPrincipal::delegate`]).
    pub async fn invoke(
        &self,
        mut request: InvokeRequest,
        task: TaskSpec,
        token: Option<&str>,
    ) -> Result<InvokeResponse, InvokeError> {
        let config = spear_proto::task::parse_task_config(&task.config_json).unwrap_or_default();
        let plan = self.plan(
            self.candidates().await,
            &request.node_id,
            &config.mcp.allowed_server_ids,
        )?;
        // The node ends the run at its wall-clock limit; wait for that, the
        // node's queue (10 s) and a margin, never forever.
        // The run's wall limit, after waiting for a slot, plus time to
        // fetch and compile the module.
        let wall_ms = config.limits.wall_ms.unwrap_or(defaults::DEFAULT_WALL_MS);
        let answer_within =
            Duration::from_millis(wall_ms) + defaults::RUN_QUEUE_WAIT + Duration::from_secs(30);
        request.task = Some(task);
        let mut failures = Vec::new();
        for node in plan {
            let span = info_span!(
                "invoke",
                otel.name = %format!("invoke_agent {}", request.task_id),
                otel.kind = "client",
                gen_ai.operation.name = "invoke_agent",
                gen_ai.agent.name = %request.task_id,
                task_id = %request.task_id,
                node_id = %node.node_id,
            );
            let channel = match self.channel(&node) {
                Ok(channel) => channel,
                Err(error) => {
                    failures.push(format!("{}: {error}", node.node_id));
                    continue;
                }
            };
            *self
                .in_flight
                .lock()
                .entry(node.node_id.clone())
                .or_default() += 1;
            let _counted = InFlight {
                invoker: self,
                node_id: node.node_id.clone(),
            };
            request.delegation = self.delegation(&request, &node.node_id, token, answer_within);
            let mut call = tonic::Request::new(request.clone());
            self.join.attach_for(&node.node_id, call.metadata_mut());
            // The node's run joins this trace.
            if let Some(traceparent) = span.in_scope(spear_common::telemetry::traceparent) {
                if let Ok(value) = traceparent.parse() {
                    call.metadata_mut().insert("traceparent", value);
                }
            }
            let result = tokio::time::timeout(
                answer_within,
                InvocationClient::new(channel)
                    .max_decoding_message_size(defaults::MAX_INVOKE_RESPONSE_BYTES)
                    .invoke(call)
                    .instrument(span),
            )
            .await;
            let Ok(result) = result else {
                return Err(InvokeError::NoAnswer {
                    node: node.node_id.clone(),
                    after: answer_within,
                });
            };
            match result {
                Ok(response) => return Ok(response.into_inner()),
                // Full, draining, or never reached: nothing ran there; try
                // the next node.
                Err(status)
                    if status.code() == Code::ResourceExhausted
                        || refused_before_running(&status)
                        || never_reached(&status) =>
                {
                    warn!(node_id = %node.node_id, message = %status.message(), "node skipped; trying the next");
                    let key = (node.node_id.clone(), node.addr.clone());
                    self.channels.lock().remove(&key);
                    failures.push(format!("{}: {}", node.node_id, status.message()));
                }
                Err(status) => return Err(InvokeError::Refused(status)),
            }
        }
        Err(InvokeError::AllFailed(failures.join("; ")))
    }
}

impl Invoker {
    /// The person's `token` sealed for `node_id` and the run's time, when
    /// SMS delegates (no delegation otherwise: the run's calls to servers
    /// that act per principal then fail with the sentence).
    fn delegation(
        &self,
        request: &InvokeRequest,
        node_id: &str,
        token: Option<&str>,
        lasting: Duration,
    ) -> bytes::Bytes {
        let (Some(per_principal), Some(token), Some(principal)) =
            (&self.per_principal, token, &request.principal)
        else {
            return Default::default();
        };
        match per_principal.delegate(node_id, &principal.label(), token, lasting) {
            Ok(sealed) => sealed.into(),
            Err(error) => {
                warn!(node_id, "no delegation for the run: {error}");
                Default::default()
            }
        }
    }

    /// Asks node `request.node_id` what a session of `task` would be
    /// offered there, with the node's live connections.
    pub async fn explain(
        &self,
        mut request: ExplainRequest,
        task: TaskSpec,
    ) -> Result<ExplainResponse, InvokeError> {
        let nodes = self.candidates().await;
        let Some(node) = nodes.into_iter().find(|n| n.node_id == request.node_id) else {
            return Err(InvokeError::NodeUnavailable(request.node_id));
        };
        let channel = self
            .channel(&node)
            .map_err(|e| InvokeError::AllFailed(format!("{}: {e}", node.node_id)))?;
        request.task = Some(task);
        let mut call = tonic::Request::new(request);
        self.join.attach_for(&node.node_id, call.metadata_mut());
        // Listing a server's tools may start it: its connect timeout and a margin.
        call.set_timeout(EXPLAIN_WITHIN);
        let answer =
            tokio::time::timeout(EXPLAIN_WITHIN, InvocationClient::new(channel).explain(call))
                .await
                .map_err(|_| InvokeError::NoAnswer {
                    node: node.node_id.clone(),
                    after: EXPLAIN_WITHIN,
                })?;
        answer
            .map(tonic::Response::into_inner)
            .map_err(InvokeError::Refused)
    }
}

/// How long a node may take to explain (it may start servers to list them).
const EXPLAIN_WITHIN: Duration = Duration::from_secs(30);

/// True when the node itself answered "unavailable" (it is draining, or
/// cannot fetch the task): a node says so before it runs anything.
fn refused_before_running(status: &tonic::Status) -> bool {
    status.code() == Code::Unavailable && std::error::Error::source(status).is_none()
}

/// True when the call failed while connecting, so the request never left
/// SMS. A failure after that (the node died mid-run) is not retried: the
/// guest may have run, and a run must happen at most once.
fn never_reached(status: &tonic::Status) -> bool {
    if status.code() != Code::Unavailable {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(error) = source {
        // tonic's connector wraps every failure to open the connection.
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionRefused | HostUnreachable | NetworkUnreachable | AddrNotAvailable
            ) {
                return true;
            }
        }
        source = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use spear_proto::v1::{HeartbeatRequest, ServerProblem, SyncState};

    use super::*;

    fn node(id: &str, synced: bool, running: u32, failed: &[&str]) -> HeartbeatRequest {
        HeartbeatRequest {
            node_id: id.into(),
            invoke_addr: format!("{id}:7400"),
            sync_state: if synced {
                SyncState::Synced
            } else {
                SyncState::Stale
            } as i32,
            running,
            problems: failed
                .iter()
                .map(|s| ServerProblem {
                    server_id: s.to_string(),
                    message: "crashed".into(),
                    failed: true,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn order(invoker: &Invoker, servers: &[&str]) -> Vec<String> {
        let servers: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
        invoker
            .plan(invoker.nodes.invocable(), "", &servers)
            .unwrap()
            .into_iter()
            .map(|n| n.node_id)
            .collect()
    }

    #[test]
    fn healthy_synced_idle_nodes_come_first() {
        let table = Arc::new(NodeTable::default());
        table.heartbeat(node("a-broken", true, 0, &["fs"])).unwrap();
        table.heartbeat(node("b-busy", true, 5, &[])).unwrap();
        table.heartbeat(node("c-stale", false, 0, &[])).unwrap();
        table.heartbeat(node("d-idle", true, 1, &["web"])).unwrap();
        let invoker = Invoker::new(table, None, None);
        // A task using fs: the node where fs failed goes after the healthy
        // synced ones; the stale node is not among the three tried.
        assert_eq!(order(&invoker, &["fs"]), ["d-idle", "b-busy", "a-broken"]);
        // A task using web: the node where web failed comes after the
        // other synced ones, whatever their load.
        assert_eq!(order(&invoker, &["web"]), ["a-broken", "b-busy", "d-idle"]);
    }

    #[test]
    fn a_pinned_node_must_be_invocable() {
        let table = Arc::new(NodeTable::default());
        table.heartbeat(node("a", true, 0, &[])).unwrap();
        let invoker = Invoker::new(table, None, None);
        assert!(matches!(
            invoker.plan(invoker.nodes.invocable(), "zz", &[]),
            Err(InvokeError::NodeUnavailable(_))
        ));
        assert!(matches!(
            Invoker::new(Arc::new(NodeTable::default()), None, None).plan(Vec::new(), "", &[]),
            Err(InvokeError::NoNode)
        ));
    }
}
