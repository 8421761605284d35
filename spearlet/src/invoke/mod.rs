//! Running tasks on this node (docs/tasks.md): take the task (sent along by
//! SMS, or asked of SMS), check what it asks for against the node policy
//! (docs/tasks.md, "Node policy") and limits, take a run slot, fetch and check its module,
//! run it with the task's policy, backend and limits, and return its
//! output, exit status and tool-call trace. [`service`] is the gRPC face.
//!
//! Admission comes first: a task that cannot run here never takes a slot,
//! and fetching and compiling happen inside the slot, so a flood of
//! invocations of hostile modules waits in the same bounded queue as runs.
//!
//! The parts: `source.rs` (where a task comes from), `admission.rs` (run
//! slots and draining), `loader.rs` (fetching and compiling modules),
//! `run.rs` (one run, the runtime and cchat put together), with the
//! checks of `grants.rs` and `limits.rs`.

mod admission;
mod grants;
mod limits;
mod loader;
mod modules;
mod run;
pub mod service;
mod source;
mod stats;

use std::sync::Arc;
use std::time::Duration;

use spear_proto::task::check_task_spec;
use spear_proto::v1::{
    ExplainRequest, ExplainResponse, InvokeRequest, InvokeResponse, TaskSpec, ToolCallTrace,
};
use tracing::{info, info_span, Instrument};

pub use limits::{LimitPolicy, LimitRefused, RunLimits};
pub use modules::{FetchLimits, ModuleError, ModuleStore};
pub use run::{run, runtime, start_costs, ChatRuntime, Linked, RunContext, RunOutcome};
pub use stats::RunStats;

use admission::Admission;
use loader::ModuleLoader;
use source::TaskSource;

use crate::cchat::Models;
use crate::llm::{BackendError, Backends};
use crate::node_policy::{ModuleSource, PolicyCell};
use crate::sms_link::SmsLink;
use crate::tool_policy::TaskPolicy;
use crate::tools::Router;
use crate::trust::RunScope;
use crate::wasm::LoadError;

// An invocation waits this long for a free run slot before the node says
// it is busy (SMS then tries another node).
use spear_proto::defaults::RUN_QUEUE_WAIT as QUEUE_WAIT;

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
    /// Its audit log refuses records: nothing runs unrecorded.
    #[error(transparent)]
    Unrecorded(#[from] crate::trust::audit::Unwritable),
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

/// Runs tasks; see the module docs. Composed of where tasks come from
/// (`source.rs`), how runs are admitted (`admission.rs`) and how
/// modules are loaded (`loader.rs`).
pub struct Invoker {
    node_id: String,
    router: Router,
    backends: Arc<Backends>,
    policy: PolicyCell,
    limits: LimitPolicy,
    tasks: TaskSource,
    admission: Admission,
    loader: ModuleLoader,
}

/// What a task may use here, checked before it queues.
struct Cleared {
    source: ModuleSource,
    limits: RunLimits,
    context: RunContext,
}

impl Invoker {
    pub fn new(deps: InvokerDeps) -> Self {
        Self {
            node_id: deps.node_id,
            router: deps.router,
            backends: deps.backends,
            policy: deps.policy,
            limits: deps.limits,
            tasks: TaskSource::new(deps.sms),
            admission: Admission::new(deps.max_running),
            loader: ModuleLoader::new(deps.runtime, deps.modules, deps.compile_timeout),
        }
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Guest run counters, for heartbeats, status and metrics.
    pub fn stats(&self) -> Arc<RunStats> {
        Arc::clone(self.admission.stats())
    }

    /// Runs the task once; see the module docs. `traceparent`, from the
    /// caller, makes the run part of its trace; `identity` is the caller
    /// and `principal` who the run is for.
    pub async fn invoke(
        &self,
        request: InvokeRequest,
        traceparent: Option<&str>,
        identity: &str,
        principal: spear_proto::v1::Principal,
    ) -> Result<InvokeResponse, InvokeError> {
        let invocation_id = crate::trust::invocation_id();
        // OpenTelemetry GenAI conventions: `invoke_agent {agent}`.
        let span = info_span!(
            "invoke",
            otel.name = %format!("invoke_agent {}", request.task_id),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %request.task_id,
            node_id = %self.node_id,
            task_id = %request.task_id,
            invocation_id = %invocation_id,
            enduser.id = %principal.label(),
        );
        spear_common::telemetry::set_parent(&span, traceparent);
        // Only SMS's delegation counts (a direct caller's run is the
        // caller's, whose principal is not a person).
        let on_behalf = crate::mcp::OnBehalf::of_run(&principal, request.delegation.clone());
        let scope = RunScope {
            task_id: request.task_id.clone(),
            invocation_id,
            identity: identity.to_string(),
            on_behalf,
            principal,
            actor: format!("node/{}", self.node_id),
            deadline: None,
            quota: None,
        };
        self.invoke_inner(request, scope).instrument(span).await
    }

    async fn invoke_inner(
        &self,
        mut request: InvokeRequest,
        scope: RunScope,
    ) -> Result<InvokeResponse, InvokeError> {
        self.admission.open()?;
        if let Some(unwritable) = self
            .router
            .trust()
            .node
            .audit
            .as_ref()
            .and_then(|log| log.unwritable())
        {
            return Err(unwritable.into());
        }
        let task = self.tasks.task_of(&mut request).await?;
        let invocation_id = scope.invocation_id.clone();
        let cleared = self.clear(&task, request.input.to_vec(), scope)?;
        let _admitted = self.admission.enter().await?;
        let pre = self.loader.load(&task, &cleared.source).await?;
        let outcome = run(self.loader.runtime(), &pre, cleared.context, cleared.limits).await;
        self.admission.stats().record(&outcome);
        info!(
            exit_code = ?outcome.exit_code,
            error = outcome.error.as_deref().unwrap_or(""),
            tool_calls = outcome.trace.len(),
            iterations = outcome.iterations,
            took = ?outcome.duration,
            "task run ended"
        );
        let mut response = response(self.node_id.clone(), task.id, outcome);
        response.invocation_id = invocation_id;
        Ok(response)
    }

    /// What a session of the request's task would be offered here, and
    /// which rule decided each server and tool.
    pub async fn explain(&self, request: ExplainRequest) -> Result<ExplainResponse, InvokeError> {
        let task = request.task.ok_or_else(|| {
            InvokeError::InvalidRequest("an explain request carries its task".into())
        })?;
        let policy = crate::tool_policy::parse_task_config(&task.config_json)?;
        let mut writes = Vec::with_capacity(request.writes.len());
        for write in request.writes {
            let value = serde_json::from_str(&write.value_json).map_err(|e| {
                InvokeError::InvalidRequest(format!(
                    "session param {}: the value is not JSON ({e}); write strings in quotes",
                    write.key
                ))
            })?;
            writes.push((write.key, value));
        }
        let explanation = self.router.explain(&policy, &writes).await;
        Ok(ExplainResponse {
            node_id: self.node_id.clone(),
            explanation_json: explanation.to_json().to_string(),
        })
    }

    /// Everything the task asks of the node, checked against its policy
    /// and caps: the module's source, the limits, the WASI grants and the
    /// backends.
    fn clear(
        &self,
        task: &TaskSpec,
        stdin: Vec<u8>,
        scope: RunScope,
    ) -> Result<Cleared, InvokeError> {
        let config = check_task_spec(task)?;
        let refused = |why: Refusal| InvokeError::Refused {
            task_id: task.id.clone(),
            why,
        };
        let policy = self.policy.current();
        let source = policy
            .modules
            .check(&task.module_uri)
            .map_err(|why| refused(why.into()))?;
        let limits = self
            .limits
            .for_task(&config.limits)
            .map_err(|why| refused(why.into()))?;
        let scope = RunScope {
            quota: config.quota.clone(),
            ..scope
        };
        let context = RunContext {
            task: TaskPolicy::from(&config.mcp),
            router: self.router.clone(),
            scope,
            models: Models::of_task(Arc::clone(&self.backends), &config.llm)?,
            stdin,
            name: task.id.clone(),
            wasi: grants::resolve(&task.id, &config.wasi, &policy)?,
        };
        Ok(Cleared {
            source,
            limits,
            context,
        })
    }
}

/// The answer to SMS: the run's output, exit and trace.
fn response(node_id: String, task_id: String, outcome: RunOutcome) -> InvokeResponse {
    InvokeResponse {
        node_id,
        task_id,
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
                    refused: t.refused.unwrap_or_default(),
                }
            })
            .collect(),
        duration_ms: outcome.duration.as_millis() as u64,
        usage: Some(outcome.used.to_proto()),
        cpu_ms: outcome.cpu.as_millis() as u64,
        invocation_id: String::new(),
        stop_reason: match (outcome.exit_code, outcome.quota_stopped) {
            (Some(_), _) => String::new(),
            (None, true) => "quota".into(),
            (None, false) => "stopped".into(),
        },
    }
}
