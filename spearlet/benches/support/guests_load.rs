//! The loop and concurrency sections of the guest benchmarks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use spear_proto::v1::{ServerSpec, Transport};
use spear_scripted_model::{Recording, ScriptedModel, Source};
use spearlet::cchat::{run_tool_loop, LoopLimits, Models, RunBudget};
use spearlet::connections::Connections;
use spearlet::invoke::{RunContext, RunLimits};
use spearlet::llm::{
    ChatMessage, ChatRequest, LlmBackend, LlmError, OpenAiBackend, OpenAiConfig, Reply, Role,
    ToolCall, Usage,
};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::{SessionPolicy, TaskPolicy};
use spearlet::tools::offered_name;
use spearlet::tools::Router;

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A model with no latency: asks for `per_turn` tool calls per turn (the
/// names of `tools` in turn) until `turns` turns were made, then answers.
/// It builds the JSON request body an OpenAI-compatible backend would send
/// (messages and every tool), so that cost, which grows with the tools
/// injected, is counted in the loop.
pub struct InstantModel {
    pub turns: usize,
    pub tools: Vec<String>,
    pub per_turn: usize,
    pub bytes: AtomicUsize,
}

impl InstantModel {
    pub fn new(turns: usize, tools: Vec<String>, per_turn: usize) -> InstantModel {
        InstantModel {
            turns,
            tools,
            per_turn,
            bytes: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl LlmBackend for InstantModel {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<Reply, LlmError> {
        let (messages, tools) = (request.messages, request.tools);
        let body = json!({
            "messages": messages.iter().map(|m| json!({"role": format!("{:?}", m.role), "content": m.content, "tool_call_id": m.tool_call_id})).collect::<Vec<_>>(),
            "tools": tools.iter().map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})).collect::<Vec<_>>(),
        });
        self.bytes.fetch_add(
            serde_json::to_vec(&body).map(|b| b.len()).unwrap_or(0),
            Ordering::Relaxed,
        );
        let done = messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let message = if done < self.turns {
            let calls = (0..self.per_turn)
                .map(|i| ToolCall {
                    id: format!("call_{done}_{i}"),
                    name: self.tools[(done + i) % self.tools.len()].clone(),
                    arguments: "{}".into(),
                })
                .collect();
            ChatMessage::assistant(String::new(), calls)
        } else {
            ChatMessage::assistant("done".into(), Vec::new())
        };
        let stop = Reply::openai_stop(None, &message);
        Ok(Reply {
            message,
            usage: Usage::default(),
            stop,
            searches: Vec::new(),
        })
    }
}

/// `SERVERS` stdio servers of 20 tools each (100 in all), and a router.
pub fn hundred_tools() -> (Vec<String>, Router, Connections) {
    const SERVERS: usize = 5;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/misbehaving_server.py"
    );
    let ids: Vec<String> = (0..SERVERS).map(|i| format!("s{i}")).collect();
    let specs: Vec<ServerSpec> = ids
        .iter()
        .map(|id| {
            let mut spec = ServerSpec {
                id: id.clone(),
                transport: Transport::Stdio as i32,
                command: "python3".into(),
                args: vec![script.into()],
                enabled: true,
                ..Default::default()
            };
            // 8 usable tools of its own plus 12 plain ones: 20 per server.
            spec.env.insert("EXTRA_TOOLS".into(), "12".into());
            spec
        })
        .collect();
    let registry = RegistryHandle::new(RegistryView::from_specs(specs));
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry);
    (ids, router, connections)
}

pub async fn loop_overhead() {
    const TURNS: usize = 10;
    let (ids, router, connections) = hundred_tools();
    let run = |allow: Option<Vec<String>>| {
        let router = router.clone();
        let ids = ids.clone();
        async move {
            let task = TaskPolicy {
                enabled: true,
                allowed_server_ids: ids.clone(),
                default_server_ids: ids,
                tool_allowlist: allow,
                tool_denylist: Vec::new(),
                approval: Vec::new(),
            };
            // Every tool injected in every request, as this section
            // measures (past 30 tools `auto` would offer the search tool).
            let session = SessionPolicy {
                tool_search: spearlet::tool_policy::ToolSearch::Off,
                ..SessionPolicy::from_task(&task)
            };
            let offered = router.tool_set(&task, &session).await.tools.len();
            let model = InstantModel::new(TURNS, vec![offered_name("s0", "tool_0")], 1);
            let mut per_iteration = Vec::new();
            for i in 0..120 {
                let mut messages = vec![ChatMessage::user("go")];
                let limits = LoopLimits {
                    max_iterations: 100,
                    max_total_tool_calls: 100,
                    deadline: Instant::now() + Duration::from_secs(60),
                };
                let started = Instant::now();
                let mut budget = RunBudget::unlimited();
                let outcome = run_tool_loop(
                    &model,
                    &router,
                    &task,
                    &session,
                    &mut messages,
                    limits,
                    &mut budget,
                )
                .await;
                let total = started.elapsed();
                assert_eq!(
                    outcome.result.as_deref().ok(),
                    Some("done"),
                    "{:?}",
                    outcome.result
                );
                assert!(outcome.trace.iter().all(|t| !t.is_error));
                let tool_time: Duration = outcome.trace.iter().map(|t| t.duration).sum();
                if i >= 20 {
                    per_iteration.push(total.saturating_sub(tool_time) / outcome.iterations);
                }
            }
            (offered, per_iteration)
        }
    };
    let (small, mut base) = run(Some(vec!["tool_0".into()])).await;
    let (large, mut many) = run(None).await;
    assert_eq!(large, 100, "100 tools must be offered");
    println!("\n## auto tool-call loop: its own time per iteration (LLM answers instantly; MCP tool time subtracted), {TURNS} tool calls + 1 answer per send, 100 sends");
    println!(
        "{small} tools injected (baseline): p50 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&mut base, 0.5)),
        ms(percentile(&mut base, 0.99))
    );
    println!(
        "{large} tools injected:            p50 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&mut many, 0.5)),
        ms(percentile(&mut many, 0.99))
    );
    connections.shutdown().await;
}

const CHAT_GUEST: &str = r#"(module
  (import "spear" "cchat_create" (func $create (result i32)))
  (import "spear" "cchat_write_msg" (func $write (param i32 i32 i32 i32 i32) (result i32)))
  (import "spear" "cchat_send" (func $send (param i32 i32) (result i32)))
  (import "spear" "cchat_recv" (func $recv (param i32 i32 i32) (result i32)))
  (import "spear" "cchat_close" (func $close (param i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "user")
  (data (i32.const 16) "hello")
  (func (export "_start") (local $h i32)
    (local.set $h (call $create))
    (drop (call $write (local.get $h) (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 5)))
    (if (i32.ne (call $send (local.get $h) (i32.const 1)) (i32.const 0)) (then unreachable))
    (i32.store (i32.const 100) (i32.const 8192))
    (if (i32.ne (call $recv (local.get $h) (i32.const 1024) (i32.const 100)) (i32.const 0)) (then unreachable))
    (drop (call $close (local.get $h)))))"#;

fn peak_rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The scripted model answering every request "hello back" after 50 ms.
async fn slow_model() -> String {
    let recording = Recording::parse(
        r#"{"turns": [{"role": "assistant", "content": "hello back"}], "repeat_last": true}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let listen = "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}"));
    let model = ScriptedModel::start(Source::Replay(recording), listen, Duration::from_millis(50))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    model.openai_url()
}

pub async fn concurrent() {
    const RUNS: usize = 500;
    const BURSTS: usize = 3;
    let base_url = slow_model().await;
    let registry = RegistryHandle::new(RegistryView::default());
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections, registry);
    let backend: Arc<dyn LlmBackend> = Arc::new(OpenAiBackend::new(OpenAiConfig {
        base_url,
        model: "test".into(),
        api_key: None,
        timeout: Duration::from_secs(30),
        max_retries: 0,
        stream: false,
    }));
    let guests = Arc::new(spearlet::invoke::runtime(None, None).unwrap_or_else(|e| panic!("{e}")));
    let pre = guests
        .load(CHAT_GUEST.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    // Latency is measured from submission, so it includes waiting for a
    // run slot (the invoker's semaphore) and for a guest thread.
    let run_once = {
        let (guests, pre, router, backend) =
            (guests.clone(), pre.clone(), router.clone(), backend.clone());
        move |slots: Arc<tokio::sync::Semaphore>| {
            let (guests, pre, router, backend) =
                (guests.clone(), pre.clone(), router.clone(), backend.clone());
            let submitted = Instant::now();
            async move {
                let _slot = slots.acquire_owned().await;
                let context = RunContext {
                    scope: Default::default(),
                    task: TaskPolicy::default(),
                    router,
                    models: Models::fixed("bench", backend),
                    stdin: Vec::new(),
                    name: "bench".into(),
                    wasi: Default::default(),
                };
                let outcome =
                    spearlet::invoke::run(&guests, &pre, context, RunLimits::default()).await;
                assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
                submitted.elapsed()
            }
        }
    };
    // Baseline: one run at a time.
    let mut single = Vec::new();
    for _ in 0..20 {
        single.push(run_once(Arc::new(tokio::sync::Semaphore::new(1))).await);
    }
    println!("\n## {RUNS} concurrent guest runs (create, write, send, recv, close) against a model answering in 50 ms, {BURSTS} bursts; latency from submission (queueing included)");
    println!(
        "one run at a time (baseline): p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&mut single, 0.5)),
        ms(percentile(&mut single, 0.99))
    );
    // With the node's default run slots, and with a slot for every run.
    for slots in [32, RUNS] {
        let (rss_before, _) = peak_rss_kib();
        let mut latencies = Vec::new();
        let started = Instant::now();
        for _ in 0..BURSTS {
            let sem = Arc::new(tokio::sync::Semaphore::new(slots));
            let handles: Vec<_> = (0..RUNS)
                .map(|_| tokio::spawn(run_once(sem.clone())))
                .collect();
            for handle in handles {
                latencies.push(handle.await.unwrap_or_else(|e| panic!("{e}")));
            }
        }
        let elapsed = started.elapsed();
        let (_, peak) = peak_rss_kib();
        println!(
            "{RUNS} at once, max_running {slots}: {:.0} runs/s, latency p50 {:.1} ms, p99 {:.1} ms; process RSS {} MiB before, peak {} MiB (the test model shares the process)",
            (RUNS * BURSTS) as f64 / elapsed.as_secs_f64(),
            ms(percentile(&mut latencies, 0.5)),
            ms(percentile(&mut latencies, 0.99)),
            rss_before / 1024,
            peak / 1024
        );
    }
}
