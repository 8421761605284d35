//! The guest runtime: one wasmtime `Engine` for the node with a linker
//! for core modules and one for components, guests compiled and cached
//! by sha256 (`compile.rs`), and a fresh `Store` with limits for every run
//! (`store.rs`; a component's run is `component_run.rs`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::warn;
use wasmtime::component::Linker as ComponentLinker;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, PoolingAllocationConfig, Store,
};

use super::cache::{ArtifactDir, ModuleCache};
use super::component::{ComponentState, EnterComponent, LinkComponent, Loaded};
use super::cpu::Metered;
use super::limiter::GuestLimiter;
use super::limits::{GuestLimits, MAX_GUEST_MEMORY};
use super::outcome::{describe, ran, GuestOutcome};
use super::state::GuestState;
use super::stop::StopReason;
use super::store::{prepare, GuestRun, Prepared};
use super::threads::GuestThreads;

/// Guests that can run at once with the pooling allocator (address space is
/// reserved up front: this many times [`MAX_GUEST_MEMORY`], never committed).
pub const POOL_SLOTS: u32 = 1024;

/// Epochs tick this often: CPU and wall limits are checked, and a guest
/// that held its thread this long yields, at this granularity.
const TICK: Duration = Duration::from_millis(10);

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the module is not valid WebAssembly for this node: {0}")]
    Compile(String),
    #[error("the module needs imports this node does not provide: {0}")]
    Link(String),
    #[error(transparent)]
    TooLarge(#[from] super::resources::Oversized),
    #[error("the module is a WebAssembly component, and this node's runtime was built without the component world")]
    NoComponents,
}

/// The node's guest runtime.
pub struct GuestRuntime<H: 'static> {
    pub(super) engine: Engine,
    pub(super) linker: Linker<GuestState<H>>,
    /// Components' linker (WASI p2 and the embedder's world) and how to
    /// enter them; `None` until [`GuestRuntime::with_components`].
    pub(super) components: Option<(ComponentLinker<ComponentState<H>>, EnterComponent<H>)>,
    pub(super) modules: Mutex<ModuleCache<Loaded<H>>>,
    pub(super) artifacts: Option<ArtifactDir>,
    pub(super) threads: GuestThreads,
    /// Tells the epoch ticker thread to stop when the runtime is dropped.
    stop_ticker: Arc<AtomicBool>,
}

impl<H: 'static> Drop for GuestRuntime<H> {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

/// Bytes of a slot's linear memory, and of its tables, kept resident
/// between guests, and how many idle slots may keep them: at most 8 × 9
/// MiB stays resident for guests not running.
const KEEP_RESIDENT: usize = 8 << 20;
const KEEP_RESIDENT_TABLE: usize = 1 << 20;
const WARM_SLOTS: u32 = 8;

fn config(pooling: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_memories(POOL_SLOTS)
            .total_tables(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS)
            .max_memory_size(MAX_GUEST_MEMORY);
        // A slot's memory is reset for its next guest by writing back only
        // the pages the last one touched (PAGEMAP_SCAN, Linux 6.7 on; else
        // a memset of the first bytes), not by madvise: the next start of
        // the same guest takes no page faults there (docs/benchmarks.md,
        // "Agents in four languages": a Python start 5.3 → 4.1 ms, a Rust
        // one 0.10 → 0.06 ms). What stays resident is bounded: at most
        // WARM_SLOTS idle slots keep up to KEEP_RESIDENT each.
        pool.linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT_TABLE)
            .pagemap_scan(wasmtime::Enabled::Auto)
            .max_unused_warm_slots(WARM_SLOTS);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        config
            .memory_reservation(MAX_GUEST_MEMORY as u64)
            .memory_guard_size(64 << 10);
    }
    config
}

/// Links a host API into the runtime's linker (for Spear's guests,
/// `cchat::add_to_linker`).
pub type LinkHost<H> = fn(&mut Linker<GuestState<H>>) -> wasmtime::Result<()>;

impl<H: Send + 'static> GuestRuntime<H> {
    /// [`GuestRuntime::with_threads`] with a guest thread per core.
    pub fn new(cache_dir: Option<PathBuf>, link: LinkHost<H>) -> wasmtime::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::with_threads(cache_dir, cores, link)
    }

    /// Builds the engine (with the pooling allocator where the machine
    /// allows it), the linker with WASI and `link`'s host API, and the
    /// guests' own `threads`, and starts the epoch ticker. Compiled modules
    /// are cached in `cache_dir`.
    pub fn with_threads(
        cache_dir: Option<PathBuf>,
        threads: usize,
        link: LinkHost<H>,
    ) -> wasmtime::Result<Self> {
        let engine = match Engine::new(&config(true)) {
            Ok(engine) => engine,
            Err(error) => {
                warn!(%error, "pooling allocator unavailable; using on-demand allocation");
                Engine::new(&config(false))?
            }
        };
        let mut linker: Linker<GuestState<H>> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut GuestState<H>| &mut s.wasi)?;
        link(&mut linker)?;
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
            components: None,
            modules: Mutex::default(),
            artifacts,
            threads: GuestThreads::new(threads).map_err(wasmtime::Error::from)?,
            stop_ticker,
        })
    }

    /// The guests' own runtime, to serve what should run beside them: a
    /// run started from its threads pays no hop to another thread.
    pub fn guest_handle(&self) -> tokio::runtime::Handle {
        self.threads.handle()
    }

    /// Links components too: WASI p2 (granting what a run's context
    /// grants) and `link`'s world; `enter` calls the world's entry point.
    pub fn with_components(
        mut self,
        link: LinkComponent<H>,
        enter: EnterComponent<H>,
    ) -> wasmtime::Result<Self> {
        let mut linker = ComponentLinker::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        link(&mut linker)?;
        self.components = Some((linker, enter));
        Ok(self)
    }

    /// A fresh store for one module run, with its limits and output pipes;
    /// on a grant that cannot be opened, the sentence and the host state
    /// back.
    fn store(
        &self,
        run: GuestRun<H>,
        limits: GuestLimits,
    ) -> Result<Prepared<GuestState<H>>, (String, H)> {
        prepare(run, &limits, |mut wasi, cpu, host| {
            let mut store = Store::new(
                &self.engine,
                GuestState {
                    wasi: wasi.build_p1(),
                    limits: GuestLimiter::new(limits.memory_bytes, limits.table_elements),
                    cpu,
                    host,
                },
            );
            store.limiter(|s| &mut s.limits);
            store
        })
    }

    /// Where a guest start's time goes, for the guest benchmarks: a fresh
    /// store (WASI context, limits, host state), instantiation in it, and
    /// a round trip to the guests' own threads (spawning an empty task
    /// there and awaiting it).
    pub async fn start_costs(
        &self,
        loaded: &Loaded<H>,
        run: GuestRun<H>,
        limits: GuestLimits,
    ) -> wasmtime::Result<StartCosts> {
        let started = Instant::now();
        let (store, instantiate) = match loaded {
            Loaded::Module(pre) => {
                let mut prepared = self
                    .store(run, limits)
                    .map_err(|(why, _)| wasmtime::Error::msg(why))?;
                let store = started.elapsed();
                let started = Instant::now();
                pre.instantiate_async(&mut prepared.store).await?;
                (store, started.elapsed())
            }
            Loaded::Component(pre) => {
                let mut prepared = self
                    .component_store(run, limits)
                    .map_err(|(why, _)| wasmtime::Error::msg(why))?;
                let store = started.elapsed();
                let started = Instant::now();
                pre.instantiate_async(&mut prepared.store).await?;
                (store, started.elapsed())
            }
        };
        let started = Instant::now();
        let _ = self.threads.spawn(async {}).await;
        let hop = started.elapsed();
        Ok(StartCosts {
            store,
            instantiate,
            hop,
        })
    }

    /// Runs the guest once, in a fresh store with `limits`, on the guests'
    /// own threads: a module's `_start`, a component's entry point.
    /// Dropping the returned future (a cancelled invocation) stops the
    /// guest at its next tick.
    pub async fn run(
        &self,
        loaded: &Loaded<H>,
        run: GuestRun<H>,
        limits: GuestLimits,
    ) -> GuestOutcome<H> {
        match loaded {
            Loaded::Module(pre) => self.run_module(pre, run, limits).await,
            Loaded::Component(pre) => self.run_component(pre, run, limits).await,
        }
    }

    async fn run_module(
        &self,
        pre: &InstancePre<GuestState<H>>,
        run: GuestRun<H>,
        limits: GuestLimits,
    ) -> GuestOutcome<H> {
        let started = Instant::now();
        let deadline = run.deadline;
        let Prepared {
            mut store,
            stdout,
            stderr,
        } = match self.store(run, limits) {
            Ok(prepared) => prepared,
            Err((why, host)) => return GuestOutcome::stopped(why, started, Some(host)),
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
            let result = tokio::time::timeout_at(deadline.into(), call).await;
            (result, store)
        };
        let (result, store) = match self.threads.spawn(Metered::new(run, clock)).await {
            Ok(ended) => ended,
            Err(error) => {
                let why = format!("the guest run failed: {error}");
                return GuestOutcome::stopped(why, started, None);
            }
        };
        let refused = store.data().limits.refused();
        let (exit_code, error) = ending(result.map_err(|_| limits.wall), refused);
        let cpu = store.data().cpu.used();
        GuestOutcome {
            exit_code,
            error,
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
            duration: started.elapsed(),
            cpu,
            host: Some(store.into_data().host),
        }
    }
}

/// Where a guest start's time goes; see [`GuestRuntime::start_costs`].
#[derive(Debug, Clone, Copy)]
pub struct StartCosts {
    pub store: Duration,
    pub instantiate: Duration,
    pub hop: Duration,
}

/// The exit code, or the sentence on why the run ended: `result` is the
/// guest's own, or `Err(wall)` when the run's deadline cut it off. A
/// refused growth is part of why a run ended badly; refused at start (its
/// initial memory or table), it is the whole story.
pub(super) fn ending(
    result: Result<wasmtime::Result<()>, Duration>,
    refused: Option<super::limiter::Refusal>,
) -> (Option<i32>, Option<String>) {
    let with_refusal = |why: String| match refused {
        Some(refused) => format!("{why}; {refused}"),
        None => why,
    };
    match result {
        Err(wall) => (None, Some(with_refusal(StopReason::Wall(wall).to_string()))),
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
    }
}

/// Lowercase hex, as digests are written in task specs and file names.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    use crate::wasm::cache::MAX_CACHED_MODULES;

    #[test]
    fn the_module_cache_keeps_the_recently_used_ones() {
        let link: LinkHost<()> = |_| Ok(());
        let runtime = GuestRuntime::new(None, link).unwrap();
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
