//! The guest runtime: one wasmtime `Engine` and one `Linker` for the node,
//! compiled modules cached by sha256 (in memory as `InstancePre`, on disk as
//! precompiled artifacts), and a fresh `Store` with limits for every run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tracing::{info, warn};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig, Store,
};
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::cache::{ArtifactDir, ModuleCache};
use super::cpu::{CpuClock, Metered};
use super::limiter::GuestLimiter;
use super::outcome::{describe, ran, GuestOutcome};
use super::stop::StopReason;
use super::threads::GuestThreads;
use super::GuestState;
use crate::cchat::{BudgetLimits, Models, RunBudget, SessionDeps, Sessions};
use crate::invoke::Granted;
use crate::policy::TaskPolicy;
use crate::tools::Router;

/// Guests that can run at once with the pooling allocator (address space is
/// reserved up front: this many times [`MAX_GUEST_MEMORY`], never committed).
pub const POOL_SLOTS: u32 = 1024;
/// The most linear memory one guest can have.
pub const MAX_GUEST_MEMORY: usize = (spear_proto::task::MAX_MEMORY_MB as usize) << 20;

/// Epochs tick this often: CPU and wall limits are checked, and a guest
/// that held its thread this long yields, at this granularity.
const TICK: Duration = Duration::from_millis(10);

/// Limits of one guest run.
#[derive(Debug, Clone, Copy)]
pub struct GuestLimits {
    pub memory_bytes: usize,
    pub table_elements: usize,
    /// Guest CPU over the whole run (guest code and the host's work for it;
    /// not waiting on the model or tools), never refilled.
    pub cpu: Duration,
    /// The whole run, host calls (the model, tools) included.
    pub wall: Duration,
    /// Captured stdout, and stderr, each.
    pub output_bytes: usize,
    pub max_sessions: usize,
    /// Per `cchat_send`.
    pub max_iterations: u32,
    /// Per `cchat_send`.
    pub max_total_tool_calls: u32,
    /// The run's budgets over every session and send.
    pub budget: BudgetLimits,
}

impl Default for GuestLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * 1024 * 1024,
            table_elements: 10_000,
            cpu: Duration::from_secs(5),
            wall: Duration::from_millis(spear_proto::defaults::DEFAULT_WALL_MS),
            output_bytes: 1024 * 1024,
            max_sessions: 64,
            max_iterations: 8,
            max_total_tool_calls: 32,
            budget: BudgetLimits {
                host_memory_bytes: 16 << 20,
                model_requests: 64,
                tokens: 1_000_000,
                tool_calls: 256,
            },
        }
    }
}

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the module is not valid WebAssembly for this node: {0}")]
    Compile(String),
    #[error("the module needs imports this node does not provide: {0}")]
    Link(String),
    #[error(transparent)]
    TooLarge(#[from] super::resources::Oversized),
}

/// What a run needs from the node.
pub struct RunContext {
    pub task: TaskPolicy,
    pub router: Router,
    /// The backends its sessions may talk to (the task's by default).
    pub models: Models,
    pub stdin: Vec<u8>,
    /// `argv[0]`, the task id.
    pub name: String,
    /// What the task grants beyond stdio (nothing by default).
    pub wasi: Granted,
}

/// The node's guest runtime.
pub struct GuestRuntime {
    engine: Engine,
    linker: Linker<GuestState>,
    modules: Mutex<ModuleCache>,
    artifacts: Option<ArtifactDir>,
    threads: GuestThreads,
    /// Tells the epoch ticker thread to stop when the runtime is dropped.
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for GuestRuntime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_memories(POOL_SLOTS)
            .total_tables(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS)
            .max_memory_size(MAX_GUEST_MEMORY);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        config
            .memory_reservation(MAX_GUEST_MEMORY as u64)
            .memory_guard_size(64 << 10);
    }
    config
}

impl GuestRuntime {
    /// [`GuestRuntime::with_threads`] with a guest thread per core.
    pub fn new(cache_dir: Option<PathBuf>) -> wasmtime::Result<GuestRuntime> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::with_threads(cache_dir, cores)
    }

    /// Builds the engine (with the pooling allocator where the machine
    /// allows it), the linker and the guests' own `threads`, and starts the
    /// epoch ticker. Compiled modules are cached in `cache_dir`.
    pub fn with_threads(
        cache_dir: Option<PathBuf>,
        threads: usize,
    ) -> wasmtime::Result<GuestRuntime> {
        let engine = match Engine::new(&config(true)) {
            Ok(engine) => engine,
            Err(error) => {
                warn!(%error, "pooling allocator unavailable; using on-demand allocation");
                Engine::new(&config(false))?
            }
        };
        let mut linker: Linker<GuestState> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut GuestState| &mut s.wasi)?;
        crate::cchat::add_to_linker(&mut linker)?;
        let ticking = engine.clone();
        let stop_ticker = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stop_ticker);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                ticking.increment_epoch();
            }
        });
        let artifacts = match &cache_dir {
            Some(dir) => Some(ArtifactDir::open(dir).map_err(wasmtime::Error::from)?),
            None => None,
        };
        Ok(GuestRuntime {
            engine,
            linker,
            modules: Mutex::default(),
            artifacts,
            threads: GuestThreads::new(threads).map_err(wasmtime::Error::from)?,
            stop_ticker,
        })
    }

    /// The linked module with this sha256, when this runtime has loaded it.
    pub fn cached(&self, digest: &[u8; 32]) -> Option<InstancePre<GuestState>> {
        self.modules.lock().get(digest)
    }

    /// Compiles (or takes from the caches) and links `wasm`.
    pub fn load(&self, wasm: &[u8]) -> Result<InstancePre<GuestState>, LoadError> {
        let digest: [u8; 32] = Sha256::digest(wasm).into();
        if let Some(pre) = self.modules.lock().get(&digest) {
            return Ok(pre);
        }
        let module = self.compile(wasm, &digest)?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        self.modules.lock().insert(digest, pre.clone());
        Ok(pre)
    }

    fn compile(&self, wasm: &[u8], digest: &[u8; 32]) -> Result<Module, LoadError> {
        if let Some(artifact) = self.artifacts.as_ref().and_then(|a| a.read(digest)) {
            // SAFETY: the artifact carries this node's MAC over the module's
            // digest and the artifact (see `cache`), so it is what this node
            // serialized; wasmtime checks it matches this engine's config.
            #[allow(unsafe_code)]
            match unsafe { Module::deserialize(&self.engine, &artifact) } {
                Ok(module) => return Ok(module),
                Err(error) => warn!(%error, "stale compiled module; compiling again"),
            }
        }
        let started = Instant::now();
        // The text format too (tests and hand-written guests).
        let wasm = wat::parse_bytes(wasm).map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        super::resources::check(&wasm)?;
        let module =
            Module::new(&self.engine, &wasm).map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        info!(digest = %hex(digest), took = ?started.elapsed(), "guest module compiled");
        if let (Some(artifacts), Ok(bytes)) = (&self.artifacts, module.serialize()) {
            if let Err(error) = artifacts.write(digest, &bytes) {
                warn!(%error, "cannot write the compiled module cache");
            }
        }
        Ok(module)
    }

    /// A fresh store for one run, with its limits and output pipes.
    fn store(
        &self,
        context: RunContext,
        limits: GuestLimits,
        deadline: Instant,
    ) -> Result<(Store<GuestState>, MemoryOutputPipe, MemoryOutputPipe), String> {
        let stdout = MemoryOutputPipe::new(limits.output_bytes);
        let stderr = MemoryOutputPipe::new(limits.output_bytes);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdin(MemoryInputPipe::new(context.stdin))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .arg(&context.name)
            .args(&context.wasi.args);
        for (key, value) in &context.wasi.env {
            wasi.env(key, value);
        }
        for dir in &context.wasi.dirs {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            // The directory opened when it was granted, not the path again.
            wasi.preopened_dir(dir.open_path(), &dir.guest, perms)
                .map_err(|e| {
                    format!(
                        "cannot open the directory {} the task grants: {e}",
                        dir.host.display()
                    )
                })?;
        }
        let wasi = wasi.build_p1();
        let cpu = Arc::new(CpuClock::default());
        let state = GuestState {
            wasi,
            limits: GuestLimiter::new(limits.memory_bytes, limits.table_elements),
            cchat: Sessions::new(SessionDeps {
                task: context.task,
                router: context.router,
                models: context.models,
                deadline,
                limits,
                budget: RunBudget::new(limits.budget),
            }),
            cpu: Arc::clone(&cpu),
            last_error: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        // Checked at every tick the guest sees, host calls or not.
        store.set_epoch_deadline(1);
        let (budget, wall) = (limits.cpu, limits.wall);
        store.epoch_deadline_callback(move |_| {
            cpu.check(budget, wall, deadline)
                .map_err(wasmtime::Error::new)
        });
        Ok((store, stdout, stderr))
    }

    /// Instantiates `pre` in `store` without running it; returns how long
    /// instantiation alone took. The guest benchmarks measure it this way.
    pub async fn instantiate_only(
        &self,
        pre: &InstancePre<GuestState>,
        context: RunContext,
        limits: GuestLimits,
    ) -> wasmtime::Result<Duration> {
        let (mut store, _, _) = self
            .store(context, limits, Instant::now() + limits.wall)
            .map_err(wasmtime::Error::msg)?;
        let started = Instant::now();
        pre.instantiate_async(&mut store).await?;
        Ok(started.elapsed())
    }

    /// Runs the guest's `_start` once, in a fresh store with `limits`, on
    /// the guests' own threads. Dropping the returned future (a cancelled
    /// invocation) stops the guest at its next tick.
    pub async fn run(
        &self,
        pre: &InstancePre<GuestState>,
        context: RunContext,
        limits: GuestLimits,
    ) -> GuestOutcome {
        let started = Instant::now();
        let deadline = started + limits.wall;
        let (mut store, stdout, stderr) = match self.store(context, limits, deadline) {
            Ok(parts) => parts,
            Err(error) => return GuestOutcome::stopped(error, started),
        };
        let pre = pre.clone();
        let clock = Arc::clone(&store.data().cpu);
        let run = async move {
            let call = async {
                let instance = pre.instantiate_async(&mut store).await?;
                let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
                start.call_async(&mut store, ()).await
            };
            // The epoch callback stops a guest at its deadline; this stops
            // one waiting in a host call (the model, a tool).
            let result = tokio::time::timeout(limits.wall, call).await;
            (result, store)
        };
        let (result, mut store) = match self.threads.spawn(Metered::new(run, clock)).await {
            Ok(ended) => ended,
            Err(error) => {
                return GuestOutcome::stopped(format!("the guest run failed: {error}"), started)
            }
        };
        // A refused growth is part of why a run ended badly; refused at
        // start (its initial memory or table), it is the whole story.
        let refused = store.data().limits.refused();
        let with_refusal = |why: String| match refused {
            Some(refused) => format!("{why}; {refused}"),
            None => why,
        };
        let (exit_code, error) = match result {
            Err(_) => (
                None,
                Some(with_refusal(StopReason::Wall(limits.wall).to_string())),
            ),
            Ok(Ok(())) => (Some(0), None),
            Ok(Err(error)) => match refused {
                Some(refused) if !ran(&error) => {
                    (None, Some(format!("the module could not start: {refused}")))
                }
                _ => {
                    let (code, why) = describe(&error);
                    (code, why.map(with_refusal))
                }
            },
        };
        let state = store.data_mut();
        GuestOutcome {
            exit_code,
            error,
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
            trace: std::mem::take(&mut state.cchat.trace),
            iterations: state.cchat.iterations,
            model_latency: std::mem::take(&mut state.cchat.model_latency),
            duration: started.elapsed(),
            cpu: state.cpu.used(),
        }
    }
}

/// Lowercase hex, as digests are written in task specs and file names.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::wasm::cache::MAX_CACHED_MODULES;

    #[test]
    fn the_module_cache_keeps_the_recently_used_ones() {
        let runtime = GuestRuntime::new(None).unwrap();
        let module = |i: usize| {
            format!(
                r#"(module (memory (export "memory") 1) (func (export "_start")) (global i32 (i32.const {i})))"#
            )
        };
        let digest = |i: usize| -> [u8; 32] { Sha256::digest(module(i).as_bytes()).into() };
        runtime.load(module(0).as_bytes()).unwrap();
        for i in 1..MAX_CACHED_MODULES + 5 {
            runtime.load(module(i).as_bytes()).unwrap();
            // Module 0 is used all along, so it stays.
            assert!(runtime.cached(&digest(0)).is_some());
        }
        assert!(
            runtime.cached(&digest(1)).is_none(),
            "the least recently used went"
        );
        assert!(runtime.cached(&digest(MAX_CACHED_MODULES + 4)).is_some());
        assert_eq!(runtime.modules.lock().len(), MAX_CACHED_MODULES);
    }
}
