//! The guest-tool section of the guest benchmarks:
//!
//! - the round trip of one guest tool call, host → the guest's dispatcher
//!   → host (`spear_alloc`, argument copy, `spear_tool_call`, result
//!   read), from the duration the loop records for each call;
//! - the loop's own time per iteration with 100 MCP tools and 20 guest
//!   tools injected, against 1 MCP tool and none (the baseline), both
//!   through the guest runtime, tool time subtracted.

use std::sync::Arc;
use std::time::Duration;

use spearlet::cchat::Models;
use spearlet::invoke::{RunContext, RunLimits, RunOutcome};
use spearlet::tool_policy::TaskPolicy;
use spearlet::tools::offered_name;
use spearlet::wasm::GuestLimits;

use super::load::{hundred_tools, InstantModel};

/// A guest that registers `tools` guest tools (`g0`, `g1`, ...) whose
/// dispatcher answers "ok", writes a user message and sends once with the
/// automatic loop.
fn tool_guest(tools: usize) -> String {
    let mut data = String::new();
    let mut register = String::new();
    for i in 0..tools {
        let spec = format!(
            r#"{{"name": "g{i}", "description": "guest tool {i}", "parameters": {{"type": "object", "properties": {{"n": {{"type": "number"}}}}}}}}"#
        );
        let at = 1024 + i * 256;
        data.push_str(&format!(
            "(data (i32.const {at}) \"{}\")\n",
            spec.replace('"', "\\\"")
        ));
        register.push_str(&format!(
            "(if (i32.lt_s (call $write_fn (local.get $h) (i32.const {at}) (i32.const {})) (i32.const 0)) (then unreachable))\n",
            spec.len()
        ));
    }
    format!(
        r#"(module
        (import "spear" "cchat_create" (func $create (result i32)))
        (import "spear" "cchat_write_fn" (func $write_fn (param i32 i32 i32) (result i32)))
        (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
        (import "spear" "cchat_send" (func $send (param i32 i32) (result i32)))
        (memory (export "memory") 2)
        (data (i32.const 0) "user")
        (data (i32.const 16) "go")
        (data (i32.const 32) "ok")
        {data}
        (func (export "spear_alloc") (param i32) (result i32) (i32.const 65536))
        (func (export "spear_tool_call") (param i32 i32 i32 i32) (result i32)
          (i32.store (local.get 3) (i32.const 32))
          (i32.store offset=4 (local.get 3) (i32.const 2))
          (i32.const 0))
        (func (export "_start") (local $h i32)
          (local.set $h (call $create))
          {register}
          (drop (call $write (local.get $h) (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 2)))
          (if (i32.ne (call $send (local.get $h) (i32.const 1)) (i32.const 0)) (then unreachable))))"#
    )
}

fn limits() -> RunLimits {
    RunLimits {
        guest: GuestLimits {
            cpu: Duration::from_secs(60),
            wall: Duration::from_secs(60),
            ..GuestLimits::default()
        },
        chat: spearlet::cchat::ChatLimits {
            max_iterations: 100,
            max_total_tool_calls: 10_000,
            budget: spearlet::cchat::BudgetLimits::UNLIMITED,
            ..spearlet::cchat::ChatLimits::default()
        },
    }
}

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub async fn guest_tools() {
    let guests = spearlet::invoke::runtime(None, None).unwrap_or_else(|e| panic!("{e}"));
    let (ids, router, connections) = hundred_tools();
    let run =
        |wasm: String, model: InstantModel, servers: Vec<String>, allow: Option<Vec<String>>| {
            let (guests, router) = (&guests, router.clone());
            async move {
                let pre = guests
                    .load(wasm.as_bytes())
                    .unwrap_or_else(|e| panic!("{e}"));
                let task = TaskPolicy {
                    enabled: true,
                    allowed_server_ids: servers.clone(),
                    default_server_ids: servers,
                    tool_allowlist: allow,
                    tool_denylist: Vec::new(),
                    approval: Vec::new(),
                };
                let context = RunContext {
                    scope: Default::default(),
                    task,
                    router,
                    models: Models::fixed("bench", Arc::new(model)),
                    stdin: Vec::new(),
                    name: "bench".into(),
                    wasi: Default::default(),
                };
                let outcome: RunOutcome =
                    spearlet::invoke::run(&guests, &pre, context, limits()).await;
                assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
                assert!(
                    outcome.trace.iter().all(|t| !t.is_error),
                    "{:?}",
                    outcome.trace.first()
                );
                outcome
            }
        };

    // Round trips: 1,000 calls of one guest tool in one answer, 20 sends.
    let mut round_trips = Vec::new();
    for _ in 0..20 {
        let model = InstantModel::new(1, vec!["g0".into()], 1000);
        let outcome = run(tool_guest(1), model, Vec::new(), None).await;
        round_trips.extend(outcome.trace.iter().map(|t| t.duration));
    }
    println!("\n## guest tool round trip (host -> spear_alloc, argument copy, spear_tool_call -> host reads the result), 20,000 calls");
    println!(
        "p50 {:.2} us, p99 {:.2} us",
        us(percentile(&mut round_trips, 0.5)),
        us(percentile(&mut round_trips, 0.99))
    );

    // The loop per iteration: one call per answer, alternating an MCP
    // tool and (with guest tools) a guest tool; tool time subtracted.
    const TURNS: usize = 10;
    let mcp_tool = offered_name("s0", "tool_0");
    let per_iteration = |outcome: &RunOutcome| {
        let tool_time: Duration = outcome.trace.iter().map(|t| t.duration).sum();
        outcome.duration.saturating_sub(tool_time) / outcome.iterations
    };
    let mut base = Vec::new();
    let mut many = Vec::new();
    for i in 0..60 {
        let model = InstantModel::new(TURNS, vec![mcp_tool.clone()], 1);
        let outcome = run(
            tool_guest(0),
            model,
            ids.clone(),
            Some(vec!["tool_0".into()]),
        )
        .await;
        if i >= 10 {
            base.push(per_iteration(&outcome));
        }
        let model = InstantModel::new(TURNS, vec![mcp_tool.clone(), "g7".into()], 1);
        let outcome = run(tool_guest(20), model, ids.clone(), None).await;
        if i >= 10 {
            many.push(per_iteration(&outcome));
        }
    }
    println!("\n## a guest's send through the loop: time per iteration (guest start and the model's instant answers included, tool time subtracted), {TURNS} tool calls + 1 answer per send, 50 sends each, alternating");
    println!(
        "1 MCP tool, no guest tools (baseline): p50 {:.3} ms, p99 {:.3} ms",
        us(percentile(&mut base, 0.5)) / 1e3,
        us(percentile(&mut base, 0.99)) / 1e3
    );
    println!(
        "100 MCP tools + 20 guest tools:        p50 {:.3} ms, p99 {:.3} ms",
        us(percentile(&mut many, 0.5)) / 1e3,
        us(percentile(&mut many, 0.99)) / 1e3
    );
    connections.shutdown().await;
}
