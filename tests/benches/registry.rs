//! Registry plane benchmarks (`cargo bench -p spear-tests --bench registry`).
//!
//! Every scenario runs real gRPC on loopback against SMS (in-process, or the
//! real `sms` binary where process memory or restarts are measured) and
//! prints medians and p99 with the baseline measured in the same run.
//! Scenarios: `propagation`, `propagation-etcd`, `propagation-tls`,
//! `memory`, `memory-tls`, `snapshot`, `reconnect`, `reconnect-tls`, and
//! `fleet` (10,000 TLS nodes: propagation, memory, heartbeat cost and
//! reconnect at once) and `fleet-replicas` (the same against three SMS
//! replicas on a three-member etcd); no argument runs them all.

mod bench_support;

use bench_support::*;

fn main() {
    spear_tests::procs::require_bins(&["sms", "spearlet"]);
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let all = args.is_empty();
    let want = |name: &str| all || args.iter().any(|a| a == name);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    println!("# registry benchmarks, {}", machine());
    if want("propagation") {
        runtime.block_on(propagation::run(Backend::Memory));
    }
    if want("propagation-etcd") {
        runtime.block_on(propagation::run(Backend::Etcd));
    }
    if want("propagation-tls") {
        // The clients on CPU 1; SMS pins itself to CPU 0.
        on_cpu_1().block_on(propagation::run_tls());
    }
    if want("snapshot") {
        runtime.block_on(snapshot::run());
    }
    if want("memory") {
        runtime.block_on(memory::run());
    }
    if want("memory-tls") {
        runtime.block_on(memory::run_tls());
    }
    if want("reconnect") {
        runtime.block_on(reconnect::run());
    }
    if want("reconnect-tls") {
        runtime.block_on(reconnect::run_tls());
    }
    if want("fleet") {
        // The bench nodes on CPU 1; the fleet pins SMS to CPU 0.
        on_cpu_1().block_on(fleet::run(1));
    }
    if want("fleet-replicas") {
        on_cpu_1().block_on(fleet::run(3));
    }
}

/// A runtime of one worker on CPU 1, for the side that loads SMS.
fn on_cpu_1() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(|| pin_to(1))
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}
