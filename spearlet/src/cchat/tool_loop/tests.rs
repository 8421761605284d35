//! The loop's transitions, one step at a time, with tokio's clock paused:
//! a model and a guest tool that take (virtual) time, so a deadline is hit
//! exactly, never raced. The wire formats and real MCP servers are the
//! integration tests' (`spearlet/tests/tool_loop*.rs`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_guest::request::RequestParams;
use tokio::time::Instant;

use super::*;
use crate::cchat::budget::BudgetLimits;
use crate::cchat::guest_tools::{GuestResult, GuestTool};
use crate::connections::Connections;
use crate::llm::{ChatRequest, Reply};
use crate::registry::{RegistryHandle, RegistryView};

/// A model that answers from a script, each answer after `delay`.
struct Model {
    delay: Duration,
    script: Mutex<VecDeque<Reply>>,
    asked: Mutex<u32>,
}

impl Model {
    fn new(delay: Duration, script: Vec<Reply>) -> Self {
        Model {
            delay,
            script: Mutex::new(script.into()),
            asked: Mutex::new(0),
        }
    }

    fn asked(&self) -> u32 {
        *self.asked.lock()
    }
}

#[async_trait]
impl LlmBackend for Model {
    async fn complete(&self, _: ChatRequest<'_>) -> Result<Reply, LlmError> {
        *self.asked.lock() += 1;
        tokio::time::sleep(self.delay).await;
        let next = self.script.lock().pop_front();
        next.ok_or_else(|| LlmError::BadReply("the script ran out".into()))
    }
}

fn text(answer: &str) -> Reply {
    Reply {
        message: ChatMessage::assistant(answer.into(), Vec::new()),
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
        },
        stop: StopReason::EndTurn,
        searches: Vec::new(),
    }
}

fn calls(ids: &[&str]) -> Reply {
    let calls = ids
        .iter()
        .map(|id| ToolCall {
            id: id.to_string(),
            name: "echo".into(),
            arguments: "{}".into(),
        })
        .collect();
    Reply {
        message: ChatMessage::assistant(String::new(), calls),
        usage: Usage::default(),
        stop: StopReason::ToolCalls,
        searches: Vec::new(),
    }
}

/// The guest's `echo` tool: answers after `delay`, or stops the run.
struct Guest {
    delay: Duration,
    stop: bool,
}

#[async_trait]
impl GuestCallbacks for Guest {
    async fn call(&mut self, tool: &GuestTool, _: &str) -> Result<GuestResult, GuestStopped> {
        tokio::time::sleep(self.delay).await;
        if self.stop {
            return Err(GuestStopped {
                tool: tool.spec.name.clone(),
                why: "it trapped".into(),
            });
        }
        Ok(GuestResult {
            text: "echoed".into(),
            is_error: false,
        })
    }
}

/// What a send works with, but the model; no MCP server is registered, so
/// the tools are the guest's `echo`.
struct Bench {
    router: Router,
    task: TaskPolicy,
    policy: SessionPolicy,
    guest_tools: GuestTools,
}

fn bench() -> Bench {
    let registry = RegistryHandle::new(RegistryView::default());
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let mut guest_tools = GuestTools::default();
    let spec = br#"{"name": "echo", "parameters": {"type": "object"}}"#;
    guest_tools
        .add(1, GuestTools::parse(spec).unwrap())
        .unwrap();
    Bench {
        router: Router::new(connections, registry),
        task: TaskPolicy::default(),
        policy: SessionPolicy::default(),
        guest_tools,
    }
}

impl Bench {
    fn setup<'a>(&'a self, model: &'a Model, mode: SendMode, limits: LoopLimits) -> SendSetup<'a> {
        SendSetup {
            backend: model,
            prices: crate::llm::Prices::none(),
            router: &self.router,
            task: &self.task,
            policy: &self.policy,
            params: &RequestParams::UNSET,
            guest_tools: &self.guest_tools,
            mode,
            limits,
            search: None,
        }
    }
}

fn limits(within: Duration) -> LoopLimits {
    LoopLimits {
        max_iterations: 8,
        max_total_tool_calls: 32,
        deadline: (Instant::now() + within).into_std(),
    }
}

/// A send's state with room for everything.
struct Parts {
    messages: Vec<ChatMessage>,
    budget: RunBudget,
    guest: Guest,
}

impl Parts {
    /// The whole send, from its first step to `Done`.
    async fn send(&mut self, setup: &SendSetup<'_>) -> LoopOutcome {
        run_send(setup, &mut self.messages, &mut self.budget, &mut self.guest).await
    }
}

fn parts(guest: Guest) -> Parts {
    Parts {
        messages: vec![ChatMessage::user("go")],
        budget: RunBudget::new(BudgetLimits::UNLIMITED),
        guest,
    }
}

fn quick_guest() -> Guest {
    Guest {
        delay: Duration::from_millis(10),
        stop: false,
    }
}

fn start<'s, 'm>(setup: &'s SendSetup<'s>, parts: &'m mut Parts) -> ToolLoop<'s, 'm> {
    let Parts {
        messages,
        budget,
        guest,
    } = parts;
    match ToolLoop::new(setup, ToolSet::default(), messages, budget, guest) {
        Ok(send) => send,
        Err(outcome) => panic!("the send did not start: {:?}", outcome.result),
    }
}

#[tokio::test(start_paused = true)]
async fn ask_run_calls_ask_done() {
    let bench = bench();
    let model = Model::new(
        Duration::from_secs(1),
        vec![calls(&["a", "b"]), text("done")],
    );
    let setup = bench.setup(&model, SendMode::Auto, limits(Duration::from_secs(60)));
    let mut parts = parts(quick_guest());
    let mut send = start(&setup, &mut parts);

    let step = send.ask().await;
    let Step::RunCalls(asked) = step else {
        panic!("an answer with calls leads to RunCalls, got {step:?}")
    };
    assert_eq!(asked.len(), 2);
    assert!(matches!(send.run_calls(asked).await, Step::Ask));
    assert!(matches!(send.ask().await, Step::Done(Ok(ref t)) if t == "done"));
    let outcome = send.finish(Ok("done".into()));
    assert_eq!(outcome.iterations, 2);
    assert_eq!(
        outcome.model_latency,
        vec![Duration::from_secs(1); 2],
        "each request took the model's time, measured on the paused clock"
    );
    let durations: Vec<_> = outcome.trace.iter().map(|t| t.duration).collect();
    assert_eq!(durations, vec![Duration::from_millis(10); 2]);
    let roles: Vec<_> = parts.messages.iter().map(|m| m.role).collect();
    use crate::llm::Role::*;
    assert_eq!(roles, vec![User, Assistant, Tool, Tool, Assistant]);
}

#[tokio::test(start_paused = true)]
async fn a_model_slower_than_the_deadline_is_cut_at_the_deadline() {
    let bench = bench();
    let model = Model::new(Duration::from_secs(60), vec![text("too late")]);
    let setup = bench.setup(&model, SendMode::Auto, limits(Duration::from_secs(5)));
    let mut parts = parts(quick_guest());
    let started = Instant::now();
    let outcome = parts.send(&setup).await;
    assert!(
        matches!(outcome.result, Err(LoopError::Deadline)),
        "{:?}",
        outcome.result
    );
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(parts.messages.len(), 1, "nothing was kept");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_passed_asks_nothing() {
    let bench = bench();
    let model = Model::new(Duration::ZERO, vec![text("never")]);
    let setup = bench.setup(&model, SendMode::Auto, limits(Duration::from_secs(1)));
    let mut parts = parts(quick_guest());
    let mut send = start(&setup, &mut parts);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(matches!(
        send.ask().await,
        Step::Done(Err(LoopError::Deadline))
    ));
    assert_eq!(model.asked(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_iteration_limit_ends_a_model_that_keeps_calling() {
    let bench = bench();
    let model = Model::new(
        Duration::from_millis(1),
        vec![calls(&["1"]), calls(&["2"]), calls(&["3"])],
    );
    let mut within = limits(Duration::from_secs(60));
    within.max_iterations = 2;
    let setup = bench.setup(&model, SendMode::Auto, within);
    let mut parts = parts(quick_guest());
    let outcome = parts.send(&setup).await;
    assert!(
        matches!(outcome.result, Err(LoopError::MaxIterations(2))),
        "{:?}",
        outcome.result
    );
    assert_eq!(model.asked(), 2);
    assert_eq!(outcome.trace.len(), 2, "every call asked for was answered");
}

#[tokio::test(start_paused = true)]
async fn once_mode_hands_the_calls_to_the_guest() {
    let bench = bench();
    let model = Model::new(Duration::from_millis(1), vec![calls(&["a"])]);
    let setup = bench.setup(&model, SendMode::Once, limits(Duration::from_secs(60)));
    let mut parts = parts(quick_guest());
    let outcome = parts.send(&setup).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(outcome.pending.len(), 1);
    assert!(outcome.trace.is_empty(), "nothing ran on the node");
}

#[tokio::test(start_paused = true)]
async fn calls_past_the_send_limit_are_answered_and_end_the_send() {
    let bench = bench();
    let model = Model::new(Duration::from_millis(1), vec![calls(&["a", "b", "c"])]);
    let mut within = limits(Duration::from_secs(60));
    within.max_total_tool_calls = 1;
    let setup = bench.setup(&model, SendMode::Auto, within);
    let mut parts = parts(quick_guest());
    let mut send = start(&setup, &mut parts);
    let Step::RunCalls(asked) = send.ask().await else {
        panic!("calls expected")
    };
    let step = send.run_calls(asked).await;
    assert!(
        matches!(step, Step::Done(Err(LoopError::MaxToolCalls(1)))),
        "{step:?}"
    );
    let outcome = send.finish(Err(LoopError::MaxToolCalls(1)));
    let errors: Vec<_> = outcome.trace.iter().map(|t| t.is_error).collect();
    assert_eq!(errors, vec![false, true, true], "one ran, two were refused");
    let answered = parts
        .messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .count();
    assert_eq!(
        answered, 3,
        "the history stays valid: every call is answered"
    );
}

#[tokio::test(start_paused = true)]
async fn a_guest_tool_that_stops_the_run_ends_the_send() {
    let bench = bench();
    let model = Model::new(
        Duration::from_millis(1),
        vec![calls(&["a"]), text("unreached")],
    );
    let setup = bench.setup(&model, SendMode::Auto, limits(Duration::from_secs(60)));
    let mut parts = parts(Guest {
        delay: Duration::from_millis(5),
        stop: true,
    });
    let outcome = parts.send(&setup).await;
    assert!(
        matches!(outcome.result, Err(LoopError::GuestStopped(_))),
        "{:?}",
        outcome.result
    );
    assert_eq!(model.asked(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_cut_by_the_token_limit_is_neither_run_nor_kept() {
    let bench = bench();
    let mut cut = calls(&["a"]);
    cut.stop = StopReason::MaxTokens;
    let model = Model::new(Duration::from_millis(1), vec![cut]);
    let setup = bench.setup(&model, SendMode::Auto, limits(Duration::from_secs(60)));
    let mut parts = parts(quick_guest());
    let mut send = start(&setup, &mut parts);
    assert!(matches!(
        send.ask().await,
        Step::Done(Err(LoopError::CutToolCall))
    ));
    drop(send);
    assert_eq!(parts.messages.len(), 1);
}
