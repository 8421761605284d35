//! The guest runtime: one wasmtime `Engine` and one `Linker` for the node,
//! compiled modules cached by sha256 (in memory as `InstancePre`, on disk as
//! precompiled artifacts), and a fresh `Store` with limits for every run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tracing::{info, warn};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig, Store, StoreLimitsBuilder,
};
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::WasiCtxBuilder;

use super::host::{add_cchat_to_linker, CchatHost, GuestState};
use crate::cchat::CallTrace;
use crate::llm::LlmBackend;
use crate::policy::TaskPolicy;
use crate::router::Router;
use spear_proto::task::WasiGrants;
use wasmtime_wasi::FsPerms;

/// Guests that can run at once with the pooling allocator (address space is
/// reserved up front: this many times [`MAX_GUEST_MEMORY`], never committed).
pub const POOL_SLOTS: u32 = 1024;
/// The most linear memory one guest can have.
pub const MAX_GUEST_MEMORY: usize = (spear_proto::task::MAX_MEMORY_MB as usize) << 20;

/// Epochs tick this often; CPU budgets are counted in ticks.
const TICK: Duration = Duration::from_millis(10);

/// Linked modules kept in memory; older ones are dropped (the compiled
/// form stays on disk, so they come back quickly).
const MAX_CACHED_MODULES: usize = 128;

/// Linked modules by sha256, dropping the least recently used past
/// [`MAX_CACHED_MODULES`].
#[derive(Default)]
struct ModuleCache {
    modules: HashMap<[u8; 32], (InstancePre<GuestState>, u64)>,
    clock: u64,
}

impl ModuleCache {
    fn get(&mut self, digest: &[u8; 32]) -> Option<InstancePre<GuestState>> {
        self.clock += 1;
        let clock = self.clock;
        self.modules.get_mut(digest).map(|(pre, used)| {
            *used = clock;
            pre.clone()
        })
    }

    fn insert(&mut self, digest: [u8; 32], pre: InstancePre<GuestState>) {
        if self.modules.len() >= MAX_CACHED_MODULES && !self.modules.contains_key(&digest) {
            let oldest = self
                .modules
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(d, _)| *d);
            if let Some(oldest) = oldest {
                self.modules.remove(&oldest);
            }
        }
        self.clock += 1;
        self.modules.insert(digest, (pre, self.clock));
    }
}

/// Limits of one guest run.
#[derive(Debug, Clone, Copy)]
pub struct GuestLimits {
    pub memory_bytes: usize,
    pub table_elements: usize,
    /// Longest stretch of guest code between host calls.
    pub cpu: Duration,
    /// The whole run, host calls (the model, tools) included.
    pub wall: Duration,
    pub output_bytes: usize,
    pub max_sessions: usize,
    pub max_iterations: u32,
    pub max_total_tool_calls: u32,
}

impl Default for GuestLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * 1024 * 1024,
            table_elements: 10_000,
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(60),
            output_bytes: 1024 * 1024,
            max_sessions: 64,
            max_iterations: 8,
            max_total_tool_calls: 32,
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct GuestOutcome {
    /// The guest's exit code (0 when `main` returned).
    pub exit_code: Option<i32>,
    /// Why the run was ended, when it did not exit by itself.
    pub error: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub trace: Vec<CallTrace>,
    /// Auto tool-call loop iterations across the run's sends.
    pub iterations: u32,
    pub duration: Duration,
}

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the module is not valid WebAssembly for this node: {0}")]
    Compile(String),
    #[error("the module needs imports this node does not provide: {0}")]
    Link(String),
}

/// What a run needs from the node.
pub struct RunContext {
    pub task: TaskPolicy,
    pub router: Router,
    pub backend: Arc<dyn LlmBackend>,
    pub stdin: Vec<u8>,
    /// argv[0], the task id.
    pub name: String,
    /// What the task grants beyond stdio (nothing by default).
    pub wasi: WasiGrants,
}

/// The node's guest runtime.
pub struct GuestRuntime {
    engine: Engine,
    linker: Linker<GuestState>,
    modules: Mutex<ModuleCache>,
    cache_dir: Option<PathBuf>,
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
    /// Builds the engine (with the pooling allocator where the machine
    /// allows it) and the linker, and starts the epoch ticker.
    pub fn new(cache_dir: Option<PathBuf>) -> wasmtime::Result<GuestRuntime> {
        let engine = match Engine::new(&config(true)) {
            Ok(engine) => engine,
            Err(error) => {
                warn!(%error, "pooling allocator unavailable; using on-demand allocation");
                Engine::new(&config(false))?
            }
        };
        let mut linker: Linker<GuestState> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut GuestState| &mut s.wasi)?;
        add_cchat_to_linker(&mut linker)?;
        let ticking = engine.clone();
        let stop_ticker = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stop_ticker);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                ticking.increment_epoch();
            }
        });
        if let Some(dir) = &cache_dir {
            std::fs::create_dir_all(dir).map_err(wasmtime::Error::from)?;
        }
        Ok(GuestRuntime {
            engine,
            linker,
            modules: Mutex::default(),
            cache_dir,
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
        let cached = self
            .cache_dir
            .as_ref()
            .map(|d| d.join(format!("{}.cwasm", hex(digest))));
        if let Some(path) = cached.as_ref().filter(|p| p.exists()) {
            // SAFETY: the file was written by `Module::serialize` of this
            // node under the digest of its source; wasmtime checks that it
            // matches this engine's configuration before using it.
            match unsafe { Module::deserialize_file(&self.engine, path) } {
                Ok(module) => return Ok(module),
                Err(error) => {
                    warn!(path = %path.display(), %error, "stale module cache entry; recompiling")
                }
            }
        }
        let started = Instant::now();
        let module =
            Module::new(&self.engine, wasm).map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        info!(digest = %hex(digest), took = ?started.elapsed(), "guest module compiled");
        if let (Some(path), Ok(bytes)) = (cached, module.serialize()) {
            let tmp = path.with_extension("tmp");
            if std::fs::write(&tmp, bytes)
                .and_then(|()| std::fs::rename(&tmp, &path))
                .is_err()
            {
                warn!(path = %path.display(), "cannot write the module cache");
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
            wasi.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| {
                    format!(
                        "cannot open the directory {} the task grants: {e}",
                        dir.host
                    )
                })?;
        }
        let wasi = wasi.build_p1();
        let state = GuestState {
            wasi,
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .table_elements(limits.table_elements)
                .instances(1)
                .trap_on_grow_failure(true)
                .build(),
            cchat: CchatHost::new(
                context.task,
                context.router,
                context.backend,
                deadline,
                limits,
            ),
            cpu_ticks: ticks(limits.cpu),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(ticks(limits.cpu));
        store.epoch_deadline_trap();
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

    /// Runs the guest's `_start` once, in a fresh store with `limits`.
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
            Err(error) => {
                return GuestOutcome {
                    exit_code: None,
                    error: Some(error),
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                    trace: Vec::new(),
                    iterations: 0,
                    duration: started.elapsed(),
                }
            }
        };
        let run = async {
            let instance = pre.instantiate_async(&mut store).await?;
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
            start.call_async(&mut store, ()).await
        };
        let result = tokio::time::timeout(limits.wall, run).await;
        let (exit_code, error) = match result {
            Err(_) => (
                None,
                Some(format!(
                    "the guest exceeded its wall-clock limit of {:?}",
                    limits.wall
                )),
            ),
            Ok(Ok(())) => (Some(0), None),
            Ok(Err(error)) => describe(&error),
        };
        let trace = std::mem::take(&mut store.data_mut().cchat.trace);
        let iterations = store.data().cchat.iterations;
        GuestOutcome {
            exit_code,
            error,
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
            trace,
            iterations,
            duration: started.elapsed(),
        }
    }
}

fn ticks(d: Duration) -> u64 {
    (d.as_millis() / TICK.as_millis()).max(1) as u64
}

/// An exit code, or one sentence on why the guest was stopped.
fn describe(error: &wasmtime::Error) -> (Option<i32>, Option<String>) {
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return (Some(exit.0), None);
    }
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        let why = match trap {
            wasmtime::Trap::Interrupt => "the guest used more than its CPU budget".to_string(),
            wasmtime::Trap::StackOverflow => {
                "the guest overflowed its stack (too deep recursion)".to_string()
            }
            wasmtime::Trap::MemoryOutOfBounds => {
                "the guest accessed memory out of bounds".to_string()
            }
            wasmtime::Trap::AllocationTooLarge => {
                "the guest tried to grow its memory past its limit".to_string()
            }
            other => format!("the guest trapped: {other}"),
        };
        let backtrace = error
            .downcast_ref::<wasmtime::WasmBacktrace>()
            .map(|b| format!("\n{b}"))
            .unwrap_or_default();
        return (None, Some(format!("{why}{backtrace}")));
    }
    let text = format!("{error:#}");
    if text.contains("memory") && text.contains("limit")
        || text.contains("forcing trap when growing memory")
    {
        return (
            None,
            Some("the guest tried to grow its memory past its limit".into()),
        );
    }
    (None, Some(format!("the guest failed: {text}")))
}

/// Lowercase hex, as digests are written in task specs and file names.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(runtime.modules.lock().modules.len(), MAX_CACHED_MODULES);
    }
}
