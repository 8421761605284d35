//! Tool search benchmark (`cargo bench -p spearlet --bench tool_search`).
//!
//! Nine real MCP servers of twenty tools each (`tests/peers/catalog_server.py`
//! over stdio, 180 tools) and the thirty tasks of
//! `tests/peers/tool-catalog/tasks.json`, each run through the node's tool
//! loop against the scripted model twice in the same run:
//!
//! - `off`: every definition in the request; the model calls the tool the
//!   task needs, then answers;
//! - `on`: the search tool alone; the model searches with the task's query,
//!   calls the tool the task needs by its name, then answers (the call
//!   only runs when the search found that tool);
//! - and in Anthropic's format, every definition against Anthropic's own
//!   search (`tool_search = "native"`: the tools deferred; the scripted
//!   provider plays a search that finds the needed tool): the bytes sent.
//!
//! It prints the bytes of each first request (what the model reads before
//! its first reply), where the needed tool ranked among the search's
//! results, and the time of one search (and of building the index) at 180
//! and at 1,000 tools (the catalog under six server names).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spear_guest::request::RequestParams;
use spear_scripted_model::{ScriptedModel, Turn};
use spearlet::cchat::{
    run_send, GuestTools, LoopLimits, NoCallbacks, RunBudget, SendMode, SendSetup,
};
use spearlet::llm::{
    AnthropicBackend, AnthropicConfig, ChatMessage, LlmBackend, OpenAiBackend, OpenAiConfig,
};
use spearlet::tool_index::Terms;
use spearlet::tool_policy::{SessionPolicy, TaskPolicy, ToolSearch};

#[path = "../tests/support/catalog_fleet.rs"]
mod catalog_fleet;
use catalog_fleet::{catalog_fleet, SERVERS};
use spearlet::tools::search::MAX_LOADED;
use spearlet::tools::{offered_name, OfferedTool, Router, Search, ToolSet, SEARCH_TOOL};

fn catalog_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/tool-catalog")
}

fn read_json(name: &str) -> Value {
    let path = catalog_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct Task {
    /// What the user asked, word for word.
    asked: String,
    query: String,
    server: String,
    tool: String,
}

fn tasks() -> Vec<Task> {
    read_json("tasks.json")["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let (server, tool) = t["needs"].as_str().unwrap().split_once('/').unwrap();
            Task {
                asked: t["task"].as_str().unwrap().into(),
                query: t["query"].as_str().unwrap().into(),
                server: server.into(),
                tool: tool.into(),
            }
        })
        .collect()
}

/// One task's run: the first request's bytes, every request's bytes, the
/// rank of the needed tool in the search (on), whether the tool ran.
struct Run {
    first_bytes: usize,
    all_bytes: usize,
    rank: Option<usize>,
    ran: bool,
}

/// How a task's run offers the tools.
#[derive(Clone, Copy, PartialEq)]
enum Arm {
    /// OpenAI format, every definition.
    Off,
    /// OpenAI format, the node's search.
    On,
    /// Anthropic format, every definition.
    AnthropicOff,
    /// Anthropic format, Anthropic's own search (deferred tools).
    Native,
}

async fn run(router: &Router, task: &TaskPolicy, t: &Task, arm: Arm) -> Run {
    let needed = offered_name(&t.server, &t.tool);
    let call = [("c", needed.as_str(), json!({}))];
    let turns = match arm {
        Arm::Off | Arm::AnthropicOff => vec![Turn::calls(&call), Turn::answer("done")],
        Arm::On => vec![
            Turn::calls(&[("s", SEARCH_TOOL, json!({"query": t.query}))]),
            Turn::calls(&call),
            Turn::answer("done"),
        ],
        Arm::Native => vec![
            Turn::native_search(&t.query, &[&needed], &call),
            Turn::answer("done"),
        ],
    };
    let model = ScriptedModel::script(turns).await;
    let backend: Box<dyn LlmBackend> = match arm {
        Arm::Off | Arm::On => Box::new(OpenAiBackend::new(OpenAiConfig {
            base_url: model.openai_url(),
            model: "scripted".into(),
            api_key: Some("sk-bench".into()),
            timeout: Duration::from_secs(10),
            max_retries: 0,
            stream: false,
        })),
        Arm::AnthropicOff | Arm::Native => Box::new(AnthropicBackend::new(AnthropicConfig {
            base_url: model.anthropic_url(),
            model: "scripted".into(),
            api_key: Some("sk-bench".into()),
            max_tokens: 1024,
            timeout: Duration::from_secs(10),
            max_retries: 0,
            stream: false,
            native_tool_search: arm == Arm::Native,
        })),
    };
    let policy = SessionPolicy {
        tool_search: match arm {
            Arm::Off | Arm::AnthropicOff => ToolSearch::Off,
            Arm::On | Arm::Native => ToolSearch::On,
        },
        ..SessionPolicy::from_task(task)
    };
    let (params, guest_tools) = (RequestParams::default(), GuestTools::default());
    let setup = SendSetup {
        backend: backend.as_ref(),
        prices: spearlet::llm::Prices::none(),
        router,
        task,
        policy: &policy,
        params: &params,
        guest_tools: &guest_tools,
        mode: SendMode::Auto,
        limits: LoopLimits {
            max_iterations: 8,
            max_total_tool_calls: 8,
            deadline: Instant::now() + Duration::from_secs(60),
        },
        search: None,
    };
    let mut messages = vec![
        ChatMessage::system("You are an assistant with tools."),
        ChatMessage::user(&t.query),
    ];
    let outcome = run_send(
        &setup,
        &mut messages,
        &mut RunBudget::unlimited(),
        &mut NoCallbacks,
    )
    .await;
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    let bytes: Vec<usize> = model
        .requests()
        .iter()
        .map(|r| r.body.to_string().len())
        .collect();
    let rank = outcome
        .trace
        .iter()
        .find_map(|c| c.search.as_ref())
        .and_then(|s| {
            s.found
                .iter()
                .position(|f| f.server == t.server && f.tool == t.tool)
        })
        .map(|i| i + 1);
    let ran = outcome
        .trace
        .iter()
        .any(|c| c.tool_call_id == "c" && !c.is_error && c.executed.is_some());
    Run {
        first_bytes: bytes[0],
        all_bytes: bytes.iter().sum(),
        rank,
        ran,
    }
}

/// The catalog under `copies` server names, as one session's tool set.
fn synthetic(copies: usize) -> ToolSet {
    let catalog = read_json("catalog.json");
    let mut set = ToolSet::default();
    for copy in 0..copies {
        for server in SERVERS {
            let id = if copy == 0 {
                server.to_string()
            } else {
                format!("{server}-{copy}")
            };
            for entry in catalog[server].as_array().unwrap() {
                let (name, description, args) = (&entry[0], &entry[1], &entry[2]);
                let properties: serde_json::Map<String, Value> = args
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), json!({"type": "string", "description": v})))
                    .collect();
                let tool: rmcp::model::Tool = serde_json::from_value(json!({
                    "name": name, "description": description,
                    "inputSchema": {"type": "object", "properties": properties}
                }))
                .unwrap();
                let offered = set.offered.offer(&id, &tool.name);
                set.tools.push(OfferedTool {
                    name: offered,
                    description: format!(
                        "[MCP server '{id}', tool '{}'] {}",
                        tool.name,
                        description.as_str().unwrap()
                    ),
                    input_schema: Arc::clone(&tool.input_schema),
                    server_id: id.clone(),
                    tool: tool.name.to_string(),
                    terms: Arc::new(Terms::of_tool(&id, &tool)),
                    definition_bytes: 0,
                });
            }
        }
    }
    set
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// One search's time over `set`, each of `queries` `rounds` times, and
/// the time to build the index.
fn search_times(label: &str, set: ToolSet, queries: &[String], rounds: usize) {
    let mut builds = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let search = Search::begin(set.clone(), None, MAX_LOADED);
        builds.push(started.elapsed());
        std::hint::black_box(search);
    }
    builds.sort();
    let mut search = Search::begin(set, None, MAX_LOADED);
    let mut times = Vec::with_capacity(queries.len() * rounds);
    for _ in 0..rounds {
        for query in queries {
            let args = json!({"query": query}).to_string();
            let started = Instant::now();
            let found = search.run(&args);
            times.push(started.elapsed());
            std::hint::black_box(found);
        }
    }
    times.sort();
    println!(
        "search at {label}: {} searches, p50 {}, p99 {}, max {}; index build p50 {}",
        times.len(),
        micros(percentile(&times, 0.5)),
        micros(percentile(&times, 0.99)),
        micros(times[times.len() - 1]),
        micros(percentile(&builds, 0.5)),
    );
}

#[tokio::main]
async fn main() {
    let (router, task) = catalog_fleet().await;
    let tasks = tasks();
    // Connect and list every server once, outside the measurements.
    let all = router
        .tool_set(&task, &SessionPolicy::from_task(&task))
        .await;
    assert_eq!(
        all.tools.len(),
        180,
        "the nine catalog servers did not all list their tools"
    );

    println!("task                                             off first B   on first B   on/off   rank  ran(off,on)  all requests B (off, on)");
    let (mut first_off, mut first_on, mut all_off, mut all_on) = (0, 0, 0, 0);
    let (mut top5, mut top1, mut ran_on) = (0, 0, 0);
    let mut worst: f64 = 0.0;
    let (mut anthropic_off, mut native, mut native_ran) = (0, 0, 0);
    for t in &tasks {
        let off = run(&router, &task, t, Arm::Off).await;
        let on = run(&router, &task, t, Arm::On).await;
        let plain = run(&router, &task, t, Arm::AnthropicOff).await;
        let deferred = run(&router, &task, t, Arm::Native).await;
        anthropic_off += plain.first_bytes;
        native += deferred.first_bytes;
        native_ran += usize::from(deferred.ran);
        let ratio = on.first_bytes as f64 / off.first_bytes as f64;
        worst = worst.max(ratio);
        first_off += off.first_bytes;
        first_on += on.first_bytes;
        all_off += off.all_bytes;
        all_on += on.all_bytes;
        top5 += usize::from(on.rank.is_some_and(|r| r <= 5));
        top1 += usize::from(on.rank == Some(1));
        ran_on += usize::from(on.ran);
        println!(
            "{:<48} {:>11} {:>12} {:>7.1}%  {:>5}  {:>5},{:<5}  {}, {}",
            format!("{}/{}", t.server, t.tool),
            off.first_bytes,
            on.first_bytes,
            ratio * 100.0,
            on.rank.map_or("-".into(), |r| r.to_string()),
            off.ran,
            on.ran,
            off.all_bytes,
            on.all_bytes,
        );
    }
    let n = tasks.len();
    println!();
    println!(
        "first request, all {n} tasks: off {first_off} B, on {first_on} B = {:.1}% (worst task {:.1}%)",
        first_on as f64 * 100.0 / first_off as f64,
        worst * 100.0
    );
    println!(
        "every request of the task: off {all_off} B, on {all_on} B = {:.1}%",
        all_on as f64 * 100.0 / all_off as f64
    );
    println!(
        "needed tool in the top 5: {top5}/{n} = {:.0}%; first: {top1}/{n}; the call ran with search on: {ran_on}/{n}",
        top5 as f64 * 100.0 / n as f64
    );
    println!(
        "Anthropic format, first request: every definition {anthropic_off} B, native search (deferred) {native} B = {:.1}%; the call ran with native search: {native_ran}/{n}",
        native as f64 * 100.0 / anthropic_off as f64
    );
    // A model that searches with the user's whole sentence instead of a
    // few words of its own: the rank of the needed tool then.
    let mut search = Search::begin(synthetic(1), None, MAX_LOADED);
    let ranks: Vec<Option<usize>> = tasks
        .iter()
        .map(|t| {
            let found = search.run(&json!({"query": t.asked}).to_string());
            let found = found.trace.map(|s| s.found).unwrap_or_default();
            found
                .iter()
                .position(|f| f.server == t.server && f.tool == t.tool)
                .map(|i| i + 1)
        })
        .collect();
    let asked5 = ranks.iter().filter(|r| r.is_some()).count();
    let asked1 = ranks.iter().filter(|r| **r == Some(1)).count();
    println!(
        "searching with the user's sentence instead: in the top 5 for {asked5}/{n} = {:.0}%, first for {asked1}/{n}; missed: {}",
        asked5 as f64 * 100.0 / n as f64,
        tasks
            .iter()
            .zip(&ranks)
            .filter(|(_, r)| r.is_none())
            .map(|(t, _)| format!("{}/{}", t.server, t.tool))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let queries: Vec<String> = tasks.iter().map(|t| t.query.clone()).collect();
    search_times("180 tools", synthetic(1), &queries, 200);
    let mut thousand = synthetic(6);
    thousand.tools.truncate(1000);
    search_times("1,000 tools", thousand, &queries, 200);
}
