//! One guest run, put together: the WASM runtime (which knows nothing of
//! chat) with the cchat host API linked in, a store whose host state is the
//! run's chat sessions, and the report read back out of both. Entry point:
//! [`run`]; [`runtime`] builds the node's runtime.

use std::path::PathBuf;

use std::time::{Duration, Instant};

use super::limits::RunLimits;
use crate::cchat::{self, CallTrace, ChatHost, Models, SessionDeps};
use crate::tool_policy::TaskPolicy;
use crate::tools::Router;
use crate::trust::{RunScope, RunTrust};
use crate::wasm::{Granted, GuestRun, GuestRuntime, Loaded, StartCosts};

/// The node's guest runtime, its guests linked against cchat.
pub type ChatRuntime = GuestRuntime<ChatHost>;

/// A linked module or component, ready to run.
pub type Linked = Loaded<ChatHost>;

/// The runtime with `threads` guest threads (one per core when `None`),
/// compiled modules cached in `cache_dir`: core modules linked against
/// the cchat functions, components against the cchat world.
pub fn runtime(
    cache_dir: Option<PathBuf>,
    threads: Option<usize>,
) -> wasmtime::Result<ChatRuntime> {
    let runtime = match threads {
        Some(threads) => GuestRuntime::with_threads(cache_dir, threads, cchat::add_to_linker)?,
        None => GuestRuntime::new(cache_dir, cchat::add_to_linker)?,
    };
    runtime.with_components(cchat::component::add_to_linker, cchat::component::enter)
}

/// What a run needs from the node.
pub struct RunContext {
    pub task: TaskPolicy,
    /// The node's router; the run gets its own, with `scope`.
    pub router: Router,
    /// Who the run's calls are made for (its deadline is set here).
    pub scope: RunScope,
    /// The backends its sessions may talk to (the task's by default).
    pub models: Models,
    pub stdin: Vec<u8>,
    /// `argv[0]`, the task id.
    pub name: String,
    /// What the task grants beyond stdio (nothing by default).
    pub wasi: Granted,
}

/// How a run ended: the guest's side and its chat's side.
#[derive(Debug, Default)]
pub struct RunOutcome {
    /// The guest's exit code (0 when `main` returned).
    pub exit_code: Option<i32>,
    /// Why the run was ended, when it did not exit by itself.
    pub error: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Every tool call of the run.
    pub trace: Vec<CallTrace>,
    /// Auto tool-call loop iterations across the run's sends.
    pub iterations: u32,
    /// How long each of the run's model requests took.
    pub model_latency: Vec<Duration>,
    pub duration: Duration,
    /// Guest CPU the run used.
    pub cpu: Duration,
    /// Its model requests, tokens, tool calls and cost.
    pub used: spear_proto::usage::Used,
    /// A fleet quota ended it.
    pub quota_stopped: bool,
}

/// The guest run `context` asks for, with its chat sessions as host state.
fn guest_run(context: RunContext, limits: RunLimits) -> (GuestRun<ChatHost>, RunTrust) {
    let deadline = Instant::now() + limits.guest.wall;
    let scope = RunScope {
        deadline: Some(deadline),
        ..context.scope
    };
    let router = context.router.for_run(scope);
    let trust = router.trust().clone();
    let deps = SessionDeps::new(
        context.task,
        router,
        context.models,
        deadline,
        limits.guest.wall,
        limits.chat,
    );
    let run = GuestRun {
        stdin: context.stdin,
        name: context.name,
        granted: context.wasi,
        deadline,
        host: ChatHost::new(deps),
    };
    (run, trust)
}

/// Runs `pre`'s `_start` once with `limits`; dropping the future (a
/// cancelled invocation) stops the guest at its next tick.
pub async fn run(
    runtime: &ChatRuntime,
    pre: &Linked,
    context: RunContext,
    limits: RunLimits,
) -> RunOutcome {
    let (guest, trust) = guest_run(context, limits);
    let ended = runtime.run(pre, guest, limits.guest).await;
    let mut outcome = RunOutcome {
        used: *trust.used.lock(),
        quota_stopped: trust.quota_stop.load(std::sync::atomic::Ordering::Relaxed),
        exit_code: ended.exit_code,
        error: ended.error,
        stdout: ended.stdout,
        stderr: ended.stderr,
        duration: ended.duration,
        cpu: ended.cpu,
        ..RunOutcome::default()
    };
    if let Some(host) = ended.host {
        let sessions = host.sessions;
        outcome.trace = sessions.trace;
        outcome.iterations = sessions.iterations;
        outcome.model_latency = sessions.model_latency;
    }
    outcome
}

/// Where a start of `pre` spends its time (the guest start benchmark).
pub async fn start_costs(
    runtime: &ChatRuntime,
    pre: &Linked,
    context: RunContext,
    limits: RunLimits,
) -> wasmtime::Result<StartCosts> {
    runtime
        .start_costs(pre, guest_run(context, limits).0, limits.guest)
        .await
}
