//! Running tasks on this node (DESIGN §3.7): take the task (sent along by
//! SMS, or asked of SMS), fetch and check its module, run it with the task's
//! policy, backend and limits, and return its output, exit status and
//! tool-call trace. [`service`] is the gRPC face of it.

mod modules;
pub mod service;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use spear_proto::task::{check_task_spec, TaskConfig};
use spear_proto::v1::tasks_client::TasksClient;
use spear_proto::v1::{GetTaskRequest, InvokeRequest, InvokeResponse, TaskSpec, ToolCallTrace};
use tokio::sync::Semaphore;
use tonic::transport::Endpoint;
use tracing::{info, info_span, Instrument};

pub use modules::{ModuleError, ModuleStore, MAX_MODULE_BYTES};
pub use stats::RunStats;

use crate::llm::{BackendError, Backends};
use crate::policy::TaskPolicy;
use crate::router::Router;
use crate::sync::SyncStatusCell;
use crate::wasm::{GuestLimits, GuestRuntime, LoadError, RunContext};

/// How long an invocation waits for a free run slot before the node says
/// it is busy (SMS then tries another node).
const QUEUE_WAIT: Duration = Duration::from_secs(10);

/// Why a task could not be run (a run that started always returns a
/// response, with the guest's exit code or why it was stopped).
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidTask(String),
    #[error("cannot get task '{task_id}' from SMS: {why}")]
    TaskUnavailable { task_id: String, why: String },
    #[error("no task '{0}' is registered in SMS; `sms tasks list` shows the ones that are")]
    TaskNotFound(String),
    #[error(transparent)]
    Module(#[from] ModuleError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("task config: wasi.{0}")]
    Reference(#[from] crate::mcp::ResolveError),
    #[error("this node already runs {0} guests and none finished within {QUEUE_WAIT:?}; try another node")]
    Busy(usize),
}

/// Everything the invoker needs from the node.
pub struct Invoker {
    pub node_id: String,
    runtime: Arc<GuestRuntime>,
    router: Router,
    backends: Arc<Backends>,
    modules: ModuleStore,
    sync_status: Arc<SyncStatusCell>,
    sms: Vec<String>,
    slots: Arc<Semaphore>,
    max_running: usize,
    stats: Arc<RunStats>,
    defaults: GuestLimits,
    /// One lock per module being loaded, so concurrent first invocations
    /// fetch and compile it once.
    loading: parking_lot::Mutex<HashMap<[u8; 32], Arc<tokio::sync::Mutex<()>>>>,
}

impl Invoker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node_id: String,
        runtime: Arc<GuestRuntime>,
        router: Router,
        backends: Arc<Backends>,
        modules: ModuleStore,
        sync_status: Arc<SyncStatusCell>,
        sms: Vec<String>,
        max_running: usize,
    ) -> Self {
        Self {
            node_id,
            runtime,
            router,
            backends,
            modules,
            sync_status,
            sms,
            slots: Arc::new(Semaphore::new(max_running)),
            max_running,
            stats: Arc::default(),
            defaults: GuestLimits::default(),
            loading: parking_lot::Mutex::default(),
        }
    }

    /// Guest run counters, for heartbeats, status and metrics.
    pub fn stats(&self) -> Arc<RunStats> {
        Arc::clone(&self.stats)
    }

    /// Runs the task once; see the module docs.
    pub async fn invoke(&self, request: InvokeRequest) -> Result<InvokeResponse, InvokeError> {
        let span = info_span!("invoke", node_id = %self.node_id, task_id = %request.task_id);
        self.invoke_inner(request).instrument(span).await
    }

    async fn invoke_inner(&self, request: InvokeRequest) -> Result<InvokeResponse, InvokeError> {
        let task = match request.task {
            Some(task) if task.id != request.task_id => {
                return Err(InvokeError::InvalidRequest(format!(
                    "the request names task '{}' but carries task '{}'",
                    request.task_id, task.id
                )))
            }
            Some(task) => task,
            None => self.fetch_task(&request.task_id).await?,
        };
        let config = check_task_spec(&task).map_err(InvokeError::InvalidTask)?;
        let backend = self
            .backends
            .get(config.llm.backend.as_deref(), config.llm.model.as_deref())?;
        // References are resolved before queueing: a task that cannot run
        // here never takes a run slot.
        let mut wasi = config.wasi.clone();
        let mut resolver = crate::mcp::Resolver::default();
        for (key, value) in wasi.env.iter_mut() {
            *value = resolver.resolve(&format!("env.{key}"), value, &|name| {
                std::env::var(name).ok()
            })?;
        }
        let pre = self.load(&task).await?;

        let _slot = tokio::time::timeout(QUEUE_WAIT, Arc::clone(&self.slots).acquire_owned())
            .await
            .map_err(|_| InvokeError::Busy(self.max_running))?
            .map_err(|_| InvokeError::Busy(self.max_running))?;
        let _running = self.stats.start();

        let context = RunContext {
            task: TaskPolicy::from(&config.mcp),
            router: self.router.clone(),
            backend,
            stdin: request.input.to_vec(),
            name: task.id.clone(),
            wasi,
        };
        let outcome = self
            .runtime
            .run(&pre, context, limits(&self.defaults, &config))
            .await;
        self.stats.record(&outcome);
        info!(
            exit_code = ?outcome.exit_code,
            error = outcome.error.as_deref().unwrap_or(""),
            tool_calls = outcome.trace.len(),
            iterations = outcome.iterations,
            took = ?outcome.duration,
            "task run ended"
        );
        Ok(InvokeResponse {
            node_id: self.node_id.clone(),
            task_id: task.id,
            ok: outcome.exit_code == Some(0),
            exit_code: outcome.exit_code,
            error: outcome.error.unwrap_or_default(),
            stdout: outcome.stdout.into(),
            stderr: outcome.stderr.into(),
            trace: outcome
                .trace
                .into_iter()
                .map(|t| {
                    let (server_id, tool) = t.executed.unwrap_or_default();
                    ToolCallTrace {
                        tool_call_id: t.tool_call_id,
                        name: t.name,
                        server_id,
                        tool,
                        is_error: t.is_error,
                        duration_us: t.duration.as_micros() as u64,
                        bytes: t.bytes as u64,
                    }
                })
                .collect(),
            duration_ms: outcome.duration.as_millis() as u64,
        })
    }

    /// The linked module: from the runtime's cache, else fetched, checked
    /// and compiled (off the async threads).
    async fn load(
        &self,
        task: &TaskSpec,
    ) -> Result<wasmtime::InstancePre<crate::wasm::host::GuestState>, InvokeError> {
        let digest = modules::digest_bytes(&task.module_sha256).ok_or_else(|| {
            InvokeError::InvalidTask(format!("task {}: module_sha256 is not hex", task.id))
        })?;
        if let Some(pre) = self.runtime.cached(&digest) {
            return Ok(pre);
        }
        let lock = Arc::clone(self.loading.lock().entry(digest).or_default());
        let _loading = lock.lock().await;
        // Whoever held the lock before may have loaded it.
        if let Some(pre) = self.runtime.cached(&digest) {
            return Ok(pre);
        }
        let result = self.fetch_and_compile(task).await;
        self.loading.lock().remove(&digest);
        result
    }

    async fn fetch_and_compile(
        &self,
        task: &TaskSpec,
    ) -> Result<wasmtime::InstancePre<crate::wasm::host::GuestState>, InvokeError> {
        let bytes = self
            .modules
            .get(&task.module_uri, &task.module_sha256)
            .await?;
        let runtime = Arc::clone(&self.runtime);
        let pre = tokio::task::spawn_blocking(move || runtime.load(&bytes))
            .await
            .map_err(|e| LoadError::Compile(format!("the compiler task failed: {e}")))??;
        Ok(pre)
    }

    /// Asks SMS (the one the node syncs from, else each configured one).
    async fn fetch_task(&self, task_id: &str) -> Result<TaskSpec, InvokeError> {
        let current = self.sync_status.status.lock().sms.clone();
        let addrs: Vec<String> = current
            .into_iter()
            .chain(self.sms.iter().cloned())
            .collect();
        let mut why = String::from("no SMS address");
        for addr in addrs {
            let Ok(endpoint) = Endpoint::from_shared(spear_proto::grpc_url(&addr)) else {
                continue;
            };
            let channel = match endpoint
                .connect_timeout(Duration::from_secs(3))
                .timeout(Duration::from_secs(10))
                .connect()
                .await
            {
                Ok(channel) => channel,
                Err(e) => {
                    why = format!("{addr}: {e}");
                    continue;
                }
            };
            match TasksClient::new(channel)
                .get_task(GetTaskRequest {
                    id: task_id.to_string(),
                })
                .await
            {
                Ok(task) => return Ok(task.into_inner()),
                Err(status) if status.code() == tonic::Code::NotFound => {
                    return Err(InvokeError::TaskNotFound(task_id.to_string()))
                }
                Err(status) => why = format!("{addr}: {}", status.message()),
            }
        }
        Err(InvokeError::TaskUnavailable {
            task_id: task_id.to_string(),
            why,
        })
    }
}

/// The node's defaults with the task's limits over them.
fn limits(defaults: &GuestLimits, config: &TaskConfig) -> GuestLimits {
    let l = &config.limits;
    GuestLimits {
        memory_bytes: l
            .memory_mb
            .map_or(defaults.memory_bytes, |mb| (mb as usize) << 20),
        table_elements: defaults.table_elements,
        cpu: l.cpu_ms.map_or(defaults.cpu, Duration::from_millis),
        wall: l.wall_ms.map_or(defaults.wall, Duration::from_millis),
        output_bytes: l.output_bytes.map_or(defaults.output_bytes, |b| b as usize),
        max_sessions: l.max_sessions.map_or(defaults.max_sessions, |n| n as usize),
        max_iterations: l.max_iterations.unwrap_or(defaults.max_iterations),
        max_total_tool_calls: l
            .max_total_tool_calls
            .unwrap_or(defaults.max_total_tool_calls),
    }
}
