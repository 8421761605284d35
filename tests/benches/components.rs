//! Agents as components against core modules
//! (`cargo bench -p spear-tests --bench components`; docs/benchmarks.md):
//! the same guest in Python and JavaScript (components, built by the real
//! toolchains) and in Rust and C (core modules: sdk-guest's
//! `bench-agent` example, and clang for wasm32-wasi),
//! tests/guests/bench/bench_agent.*, run through the node's own runtime
//! (`spearlet::invoke::run`) against a scripted OpenAI-compatible model:
//!
//! - first compile (`load` with no cache) of each;
//! - start of a cached guest to its first host call and back (`start`:
//!   the compiled guest from the in-memory cache by its digest, as the
//!   node takes it, a fresh store, instantiate, one `get-param`, return),
//!   p50 and p99 of 300 runs;
//! - resident memory per running guest: the process's peak RSS growth
//!   while 4 of them spin at once, over 4;
//! - a cchat round trip (a session, one user message, a send without
//!   tools to the model, close), mean of 300 in runs of 60; the Rust
//!   agent also as a component (tests/guests/bench/rust-component), so
//!   the boundary's own cost is the difference of the two Rust rows.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_scripted_model::{ScriptedModel, Turn};
use spear_tests::components::{js_agent, python_agent};
use spear_tests::tasks::repo_file;
use spearlet::cchat::Models;
use spearlet::connections::Connections;
use spearlet::invoke::{ChatRuntime, Linked, RunContext, RunLimits};
use spearlet::llm::{OpenAiBackend, OpenAiConfig};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::TaskPolicy;
use spearlet::tools::Router;

const STARTS: usize = 300;
const ROUND_TRIPS: usize = 300;
const SPINNING: usize = 4;

type Context = Arc<dyn Fn(&str) -> RunContext + Send + Sync>;

fn c_agent(into: &Path) -> std::path::PathBuf {
    let out = into.join("bench-c.wasm");
    let status = Command::new("clang")
        .args([
            "--target=wasm32-wasi",
            "-O2",
            "-std=c11",
            "-Wl,--strip-debug",
            "-I",
        ])
        .arg(repo_file("sdk-guest/c"))
        .arg(repo_file("tests/guests/bench/bench_agent.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("clang: {e} (scripts/setup.sh installs it)"));
    assert!(status.success());
    out
}

/// sdk-guest's bench-agent example, built for wasm32-wasip1 (release).
fn rust_agent() -> std::path::PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/spear/target")
        });
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            "wasm32-wasip1",
            "-p",
            "spear-guest",
            "--example",
            "bench-agent",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap_or_else(|e| panic!("cargo: {e}"));
    assert!(status.success());
    target.join("wasm32-wasip1/release/examples/bench-agent.wasm")
}

/// The same agent as a Rust component (tests/guests/bench/rust-component,
/// wit-bindgen against wit/spear-agent.wit, wasm32-wasip2): the round trip
/// through the component boundary with the same code on both sides of it.
fn rust_component() -> std::path::PathBuf {
    let target = std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
        .join(".cache/spear/bench-component");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
        .current_dir(repo_file("tests/guests/bench/rust-component"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap_or_else(|e| panic!("cargo: {e}"));
    assert!(
        status.success(),
        "rustup target add wasm32-wasip2 (scripts/setup.sh)"
    );
    target.join("wasm32-wasip2/release/bench_component.wasm")
}

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn run_once(guests: &ChatRuntime, pre: &Linked, context: RunContext, limits: RunLimits) {
    let outcome = spearlet::invoke::run(guests, pre, context, limits).await;
    assert!(
        outcome.exit_code == Some(0)
            || outcome
                .error
                .as_deref()
                .is_some_and(|e| e.contains("wall-clock")),
        "{:?} {}",
        outcome.error,
        String::from_utf8_lossy(&outcome.stderr)
    );
}

/// One guest's figures, printed as a row.
async fn measure(name: &str, bytes: &[u8], context: &Context) {
    // A fresh runtime: no compiled form in memory or on disk.
    let guests = Arc::new(spearlet::invoke::runtime(None, None).unwrap_or_else(|e| panic!("{e}")));
    let started = Instant::now();
    let pre = guests.load(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let compile = started.elapsed();

    // As the node starts a run: the compiled guest taken from the cache by
    // the task's declared sha256 (the bytes are not read or hashed again).
    let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(bytes).into();
    let mut starts = Vec::new();
    for i in 0..STARTS + 20 {
        let started = Instant::now();
        let pre = guests
            .cached(&digest)
            .unwrap_or_else(|| panic!("{name} is not cached"));
        run_once(&guests, &pre, context("start"), RunLimits::default()).await;
        if i >= 20 {
            starts.push(started.elapsed());
        }
    }
    let (p50, p99) = (percentile(&mut starts, 0.5), percentile(&mut starts, 0.99));

    // A run may make 64 model requests (limits.max_model_requests): the
    // round trips in runs of 60.
    let started = Instant::now();
    for _ in 0..ROUND_TRIPS / 60 {
        run_once(&guests, &pre, context("chat 60"), RunLimits::default()).await;
    }
    let round_trip = started.elapsed() / ROUND_TRIPS as u32;

    let before = rss_kib();
    let mut limits = RunLimits::default();
    limits.guest.wall = Duration::from_millis(1500);
    let spinning: Vec<_> = (0..SPINNING)
        .map(|_| {
            let (guests, pre, context) = (Arc::clone(&guests), pre.clone(), context("spin"));
            tokio::spawn(async move { run_once(&guests, &pre, context, limits).await })
        })
        .collect();
    let mut peak = before;
    while !spinning.iter().all(|s| s.is_finished()) {
        peak = peak.max(rss_kib());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for s in spinning {
        s.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let per_guest = peak.saturating_sub(before) as f64 / SPINNING as f64 / 1024.0;
    println!(
        "| {name} | {:.2} MB | {:.0} ms | {:.2} ms | {:.2} ms | {per_guest:.1} MiB | {:.3} ms |",
        bytes.len() as f64 / 1e6,
        ms(compile),
        ms(p50),
        ms(p99),
        ms(round_trip)
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(async {
        let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = repo_file("tests/guests/bench");
        let guests = [
            ("Rust (core module)", std::fs::read(rust_agent())),
            ("Rust (component)", std::fs::read(rust_component())),
            ("C (core module)", std::fs::read(c_agent(work.path()))),
            ("Python (component)", std::fs::read(python_agent(&dir, "bench_agent", work.path()))),
            ("JavaScript (component)", std::fs::read(js_agent(&dir.join("bench_agent.js"), "bench-js", work.path()))),
        ];
        // Enough answers for every round trip of every guest.
        let model = ScriptedModel::script(vec![Turn::answer("ok"); 5 * ROUND_TRIPS]).await;
        let backend = Arc::new(OpenAiBackend::new(OpenAiConfig {
            base_url: model.openai_url(),
            model: "scripted".into(),
            api_key: None,
            timeout: Duration::from_secs(10),
            max_retries: 0,
            stream: false,
        }));
        let registry = RegistryHandle::new(RegistryView::default());
        let router = Router::new(Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None))), registry);
        let task = TaskPolicy { enabled: true, ..Default::default() };
        let context: Context = Arc::new(move |input: &str| RunContext {
            scope: Default::default(),
            task: task.clone(),
            router: router.clone(),
            models: Models::fixed("bench", backend.clone()),
            stdin: input.as_bytes().to_vec(),
            name: "bench".into(),
            wasi: Default::default(),
        });
        println!("\n## agents as components against a core module (release build)");
        println!("| guest | size | first compile | start to first host call p50 | p99 | RSS per running guest | cchat round trip (mean of {ROUND_TRIPS}) |");
        println!("|---|---|---|---|---|---|---|");
        // SPEAR_BENCH_ONLY=Python: only the guests whose name contains it
        // (to profile one of them).
        let only = std::env::var("SPEAR_BENCH_ONLY").unwrap_or_default();
        for (name, bytes) in guests.into_iter().filter(|(name, _)| name.contains(only.as_str())) {
            let bytes = bytes.unwrap_or_else(|e| panic!("{name}: {e}"));
            measure(name, &bytes, &context).await;
        }
    });
}
