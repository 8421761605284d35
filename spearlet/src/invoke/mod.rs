//! Running tasks on this node (DESIGN §3.7): take the task (sent along by
//! SMS, or asked of SMS), check what it asks for against the node policy
//! (DESIGN §3.8) and limits, take a run slot, fetch and check its module,
//! run it with the task's policy, backend and limits, and return its
//! output, exit status and tool-call trace. [`service`] is the gRPC face.
//!
//! Admission comes first: a task that cannot run here never takes a slot,
//! and fetching and compiling happen inside the slot, so a flood of
//! invocations of hostile modules waits in the same bounded queue as runs.

mod grants;
mod limits;
mod modules;
mod run;
pub mod service;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use spear_proto::task::check_task_spec;
use spear_proto::v1::{GetTaskRequest, InvokeRequest, InvokeResponse, TaskSpec, ToolCallTrace};
use tokio::sync::Semaphore;
use tracing::{info, info_span, Instrument};

pub use limits::{LimitPolicy, LimitRefused, RunLimits};
pub use modules::{FetchLimits, ModuleError, ModuleStore};
pub use run::{instantiate_only, run, runtime, ChatRuntime, Linked, RunContext, RunOutcome};
pub use stats::RunStats;

use crate::cchat::Models;
use crate::llm::{BackendError, Backends};
use crate::node_policy::{ModuleSource, PolicyCell};
use crate::policy::TaskPolicy;
use crate::sms_link::SmsLink;
use crate::tools::Router;
use crate::wasm::LoadError;

// An invocation waits this long for a free run slot before the node says
// it is busy (SMS then tries another node).
use spear_proto::defaults::RUN_QUEUE_WAIT as QUEUE_WAIT;

/// How long SMS has to answer for a task's spec.
const FETCH_TASK_WITHIN: Duration = Duration::from_secs(10);

/// Why a task could not be run (a run that started always returns a
/// response, with the guest's exit code or why it was stopped).
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error(transparent)]
    InvalidTask(#[from] spear_proto::task::TaskError),
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
    Reference(#[from] crate::env_refs::ResolveError),
    /// The task asks for something this node's policy or caps refuse.
    #[error("task {task_id}: {why}")]
    Refused { task_id: String, why: Refusal },
    #[error("compiling the module took longer than {0:?} (guests.compile_timeout_ms)")]
    CompileTimeout(Duration),
    #[error("this node already runs {0} guests and none finished within {QUEUE_WAIT:?}; try another node")]
    Busy(usize),
    #[error(
        "this node is shutting down: it finishes its runs and takes no more; try another node"
    )]
    Draining,
}

/// What a node's policy or caps refuse a task.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Module(#[from] crate::node_policy::ModuleRefused),
    #[error(transparent)]
    Limit(#[from] LimitRefused),
    #[error(transparent)]
    Dir(#[from] crate::node_policy::DirRefused),
}

/// Everything the invoker needs from the node.
pub struct InvokerDeps {
    pub node_id: String,
    pub runtime: Arc<ChatRuntime>,
    pub router: Router,
    pub backends: Arc<Backends>,
    pub modules: ModuleStore,
    /// The node's policy, as it stands at each run's start.
    pub policy: PolicyCell,
    pub limits: LimitPolicy,
    /// Where tasks are fetched from.
    pub sms: SmsLink,
    pub max_running: usize,
    pub compile_timeout: Duration,
}

/// Runs tasks; see the module docs.
pub struct Invoker {
    deps: InvokerDeps,
    slots: Arc<Semaphore>,
    /// Compiles at once, held by the compiling thread itself so a compile
    /// that outlived its timeout still counts until it ends.
    compiles: Arc<Semaphore>,
    stats: Arc<RunStats>,
    /// One lock per module being loaded, so concurrent first invocations
    /// fetch and compile it once.
    loading: parking_lot::Mutex<HashMap<[u8; 32], Arc<tokio::sync::Mutex<()>>>>,
}

impl Invoker {
    pub fn new(deps: InvokerDeps) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            slots: Arc::new(Semaphore::new(deps.max_running)),
            compiles: Arc::new(Semaphore::new(cores)),
            stats: Arc::default(),
            loading: parking_lot::Mutex::default(),
            deps,
        }
    }

    pub fn node_id(&self) -> &str {
        &self.deps.node_id
    }

    /// Guest run counters, for heartbeats, status and metrics.
    pub fn stats(&self) -> Arc<RunStats> {
        Arc::clone(&self.stats)
    }

    /// Runs the task once; see the module docs. `traceparent`, from the
    /// caller, makes the run part of its trace.
    pub async fn invoke(
        &self,
        request: InvokeRequest,
        traceparent: Option<&str>,
    ) -> Result<InvokeResponse, InvokeError> {
        // OpenTelemetry GenAI conventions: `invoke_agent {agent}`.
        let span = info_span!(
            "invoke",
            otel.name = %format!("invoke_agent {}", request.task_id),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %request.task_id,
            node_id = %self.deps.node_id,
            task_id = %request.task_id,
        );
        spear_common::telemetry::set_parent(&span, traceparent);
        self.invoke_inner(request).instrument(span).await
    }

    async fn invoke_inner(&self, request: InvokeRequest) -> Result<InvokeResponse, InvokeError> {
        if self.stats.is_draining() {
            return Err(InvokeError::Draining);
        }
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
        let config = check_task_spec(&task)?;
        let refused = |why: Refusal| InvokeError::Refused {
            task_id: task.id.clone(),
            why,
        };
        let module_refused = |why: crate::node_policy::ModuleRefused| refused(why.into());
        let limit_refused = |why: LimitRefused| refused(why.into());
        // Everything the task asks of the node is checked before it queues.
        let policy = self.deps.policy.current();
        let source = policy
            .modules
            .check(&task.module_uri)
            .map_err(module_refused)?;
        let limits = self
            .deps
            .limits
            .for_task(&config.limits)
            .map_err(limit_refused)?;
        let wasi = grants::resolve(&task.id, &config.wasi, &policy)?;
        let models = Models::of_task(Arc::clone(&self.deps.backends), &config.llm)?;

        let _slot = tokio::time::timeout(QUEUE_WAIT, Arc::clone(&self.slots).acquire_owned())
            .await
            .map_err(|_| InvokeError::Busy(self.deps.max_running))?
            .map_err(|_| InvokeError::Busy(self.deps.max_running))?;
        let _running = self.stats.start();
        // Checked once counted, so a drain that starts now waits for it.
        if self.stats.is_draining() {
            return Err(InvokeError::Draining);
        }
        let pre = self.load(&task, &source).await?;

        let context = RunContext {
            task: TaskPolicy::from(&config.mcp),
            router: self.deps.router.clone(),
            models,
            stdin: request.input.to_vec(),
            name: task.id.clone(),
            wasi,
        };
        let outcome = run(&self.deps.runtime, &pre, context, limits).await;
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
            node_id: self.deps.node_id.clone(),
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
                    // A guest tool has no server: its name is the tool.
                    let ran = t.executed.unwrap_or_default();
                    ToolCallTrace {
                        tool_call_id: t.tool_call_id,
                        name: t.name,
                        server_id: ran.server,
                        tool: t.guest_tool.unwrap_or(ran.tool),
                        is_error: t.is_error,
                        duration_us: t.duration.as_micros() as u64,
                        bytes: t.bytes as u64,
                    }
                })
                .collect(),
            duration_ms: outcome.duration.as_millis() as u64,
            cpu_ms: outcome.cpu.as_millis() as u64,
        })
    }

    /// The linked module: from the runtime's cache, else fetched, checked
    /// and compiled (off the async threads).
    async fn load(&self, task: &TaskSpec, source: &ModuleSource) -> Result<Linked, InvokeError> {
        let digest = modules::digest_bytes(&task.module_sha256)
            .ok_or_else(|| spear_proto::task::TaskError::ModuleSha.in_task(&task.id))?;
        if let Some(pre) = self.deps.runtime.cached(&digest) {
            return Ok(pre);
        }
        let lock = Arc::clone(self.loading.lock().entry(digest).or_default());
        let _loading = lock.lock().await;
        // Whoever held the lock before may have loaded it.
        if let Some(pre) = self.deps.runtime.cached(&digest) {
            return Ok(pre);
        }
        let result = self.fetch_and_compile(task, source).await;
        self.loading.lock().remove(&digest);
        result
    }

    async fn fetch_and_compile(
        &self,
        task: &TaskSpec,
        source: &ModuleSource,
    ) -> Result<Linked, InvokeError> {
        let bytes = self
            .deps
            .modules
            .get(&task.module_uri, source, &task.module_sha256)
            .await?;
        let runtime = Arc::clone(&self.deps.runtime);
        let compiles = Arc::clone(&self.compiles);
        let compile = async move {
            let permit = compiles.acquire_owned().await;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                runtime.load(&bytes)
            })
            .await
        };
        let timeout = self.deps.compile_timeout;
        let pre = tokio::time::timeout(timeout, compile)
            .await
            .map_err(|_| InvokeError::CompileTimeout(timeout))?
            .map_err(|e| LoadError::Compile(format!("the compiler task failed: {e}")))??;
        Ok(pre)
    }

    /// Asks SMS (the one the node syncs from, else each configured one).
    async fn fetch_task(&self, task_id: &str) -> Result<TaskSpec, InvokeError> {
        let mut why = String::from("no SMS address");
        for addr in self.deps.sms.candidates() {
            let mut tasks = match self.deps.sms.tasks(&addr).await {
                Ok(tasks) => tasks,
                Err(e) => {
                    why = e.to_string();
                    continue;
                }
            };
            let request = GetTaskRequest {
                id: task_id.to_string(),
            };
            match tokio::time::timeout(FETCH_TASK_WITHIN, tasks.get_task(request)).await {
                Ok(Ok(task)) => return Ok(task.into_inner()),
                Ok(Err(status)) if status.code() == tonic::Code::NotFound => {
                    return Err(InvokeError::TaskNotFound(task_id.to_string()))
                }
                Ok(Err(status)) => why = format!("{addr}: {}", status.message()),
                Err(_) => why = format!("{addr} did not answer within {FETCH_TASK_WITHIN:?}"),
            }
        }
        Err(InvokeError::TaskUnavailable {
            task_id: task_id.to_string(),
            why,
        })
    }
}
