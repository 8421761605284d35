//! Guest runtime benchmarks (`cargo bench -p spearlet --bench guests [-- section...]`):
//!
//! - `start`: a guest run from a cached module, and where its time goes
//!   (a fresh store, instantiation, the round trip to the guest threads);
//! - `get_param`: one `cchat_ctl_get_param` round trip;
//! - `loop`: the auto tool-call loop's own cost per iteration with 100 MCP
//!   tools injected (real stdio servers), LLM and tool time excluded;
//! - `guest_tools`: a guest tool's round trip through the guest's
//!   dispatcher, and the loop per iteration with 100 MCP tools and 20 guest
//!   tools injected;
//! - `concurrent`: 500 guest runs at once against a test model (OpenAI wire
//!   format over HTTP) that answers in 50 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use spearlet::cchat::Models;
use spearlet::connections::Connections;
use spearlet::invoke::{RunContext, RunLimits};
use spearlet::llm::{OpenAiBackend, OpenAiConfig};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::TaskPolicy;
use spearlet::tools::Router;

const EMPTY: &str = r#"(module (memory (export "memory") 1) (func (export "_start")))"#;

fn get_param_loop(n: u32) -> String {
    format!(
        r#"(module
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_ctl_get_param" (func $get (param i32 i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "mcp.server_ids")
        (func (export "_start") (local $h i32) (local $i i32)
          (local.set $h (call $create))
          (loop $again
            (i32.store (i32.const 100) (i32.const 4096))
            (drop (call $get (local.get $h) (i32.const 0) (i32.const 14) (i32.const 200) (i32.const 100)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $again (i32.lt_u (local.get $i) (i32.const {n}))))))"#
    )
}

/// 2,000 starts of the empty guest (after 200 to warm up), each timed
/// from loading the cached module to the run's end.
async fn starts(
    guests: &spearlet::invoke::ChatRuntime,
    context: &Arc<dyn Fn() -> RunContext + Send + Sync>,
) -> Vec<Duration> {
    let mut samples = Vec::new();
    for i in 0..2200 {
        let started = Instant::now();
        let pre = guests
            .load(EMPTY.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let outcome = spearlet::invoke::run(guests, &pre, context(), RunLimits::default()).await;
        if i >= 200 {
            samples.push(started.elapsed());
        }
        assert_eq!(outcome.exit_code, Some(0));
    }
    samples
}

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

#[path = "support/guests_load.rs"]
mod load;
#[path = "support/guest_tools.rs"]
mod tools_bench;
use load::{concurrent, loop_overhead};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(async {
        let registry = RegistryHandle::new(RegistryView::default());
        let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
        let router = Router::new(connections, registry);
        let backend = Arc::new(OpenAiBackend::new(OpenAiConfig {
            base_url: "http://127.0.0.1:9".into(),
            model: "unused".into(),
            api_key: None,
            timeout: Duration::from_secs(1),
            max_retries: 0,
            stream: false,
        }));
        let task = TaskPolicy { enabled: true, allowed_server_ids: vec!["fs".into()], default_server_ids: vec!["fs".into()], ..Default::default() };
        let context: Arc<dyn Fn() -> RunContext + Send + Sync> = {
            let (task, router, backend) = (task.clone(), router.clone(), backend.clone());
            Arc::new(move || RunContext { scope: Default::default(), task: task.clone(), router: router.clone(), models: Models::fixed("bench", backend.clone()), stdin: Vec::new(), name: "bench".into(), wasi: Default::default() })
        };
        let guests = Arc::new(spearlet::invoke::runtime(None, None).unwrap_or_else(|e| panic!("{e}")));

        if want("start") {
        // From the node's own threads: every start hops to a guest thread.
        let mut samples = starts(&guests, &context).await;
        let (p50, p99) = (percentile(&mut samples, 0.5), percentile(&mut samples, 0.99));
        println!("\n## guest start from a cached module (load + fresh store + instantiate + run an empty _start), 2,000 runs");
        println!("from the node's own threads (baseline, a hop to a guest thread each): p50 {:.1} us, p99 {:.1} us", p50.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);
        // From a guest thread, where the Invocation service runs.
        let (on, context_on) = (Arc::clone(&guests), context.clone());
        let handle = guests.guest_handle();
        let mut samples = handle.spawn(async move { starts(&on, &context_on).await }).await.unwrap_or_else(|e| panic!("{e}"));
        let (p50, p99) = (percentile(&mut samples, 0.5), percentile(&mut samples, 0.99));
        println!("from a guest thread (as invocations start now):                    p50 {:.1} us, p99 {:.1} us", p50.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);

        let pre = guests.load(EMPTY.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let (mut store, mut instantiate, mut hop) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..2200 {
            let costs = spearlet::invoke::start_costs(&guests, &pre, context(), RunLimits::default()).await.unwrap_or_else(|e| panic!("{e}"));
            if i >= 200 {
                store.push(costs.store);
                instantiate.push(costs.instantiate);
                hop.push(costs.hop);
            }
        }
        println!("\n## where a start goes, 2,000 of each (p50, p99)");
        for (what, samples) in [("fresh store (WASI context, limits, chat state)", &mut store), ("instantiation alone (InstancePre::instantiate_async)", &mut instantiate), ("round trip to the guest threads (empty task)", &mut hop)] {
            let (p50, p99) = (percentile(samples, 0.5), percentile(samples, 0.99));
            println!("{what}: p50 {:.1} us, p99 {:.1} us", p50.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);
        }
        }

        if want("get_param") {
        const N: u32 = 200_000;
        let baseline = guests.load(get_param_loop(1).as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let looped = guests.load(get_param_loop(N).as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let outcome = spearlet::invoke::run(&guests, &baseline, context(), RunLimits::default()).await;
        let one = started.elapsed();
        assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
        let started = Instant::now();
        let outcome = spearlet::invoke::run(&guests, &looped, context(), RunLimits::default()).await;
        let many = started.elapsed();
        assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
        println!("\n## cchat_ctl_get_param round trip (guest -> host -> JSON -> guest memory), {N} calls in one run");
        println!(
            "{:.3} us per call (run of {N} calls {:.1} ms minus a 1-call run {:.1} ms)",
            (many.saturating_sub(one)).as_secs_f64() * 1e6 / f64::from(N),
            many.as_secs_f64() * 1e3,
            one.as_secs_f64() * 1e3
        );
        }
    });
    if want("loop") {
        runtime.block_on(loop_overhead());
    }
    if want("guest_tools") {
        runtime.block_on(tools_bench::guest_tools());
    }
    if want("concurrent") {
        runtime.block_on(concurrent());
    }
}

fn want(name: &str) -> bool {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    args.is_empty() || args.iter().any(|a| a == name)
}
