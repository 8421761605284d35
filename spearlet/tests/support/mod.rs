//! Shared by the tool-loop tests: backends pointed at the scripted model
//! (`spear-scripted-model`: exact OpenAI and Anthropic wire formats, JSON or
//! event streams, every request validated), and a fixture with a real MCP
//! server over stdio.
// Each test binary uses some of these helpers.
#![allow(dead_code, unused_imports)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_proto::v1::{ServerSpec, Transport};
pub use spear_scripted_model::{Call, ScriptedModel, Turn};
use spearlet::cchat::{run_tool_loop, LoopLimits, LoopOutcome, RunBudget};
use spearlet::connections::Connections;
use spearlet::llm::{
    AnthropicBackend, AnthropicConfig, ChatMessage, LlmBackend, OpenAiBackend, OpenAiConfig, Role,
};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::{SessionPolicy, TaskPolicy};
use spearlet::tools::Router;

pub struct Fixture {
    pub router: Router,
    pub connections: Connections,
    pub task: TaskPolicy,
    pub session: SessionPolicy,
}

pub fn fixture() -> Fixture {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/misbehaving_server.py"
    );
    // `mb` with the default call timeout, for tools that answer; `tight`,
    // the same server with a short one, for the tool that hangs.
    let spec = |id: &str, call_ms| ServerSpec {
        id: id.into(),
        transport: Transport::Stdio as i32,
        command: "python3".into(),
        args: vec![script.into()],
        denied_tools: vec!["env".into()],
        timeouts: Some(spear_proto::v1::Timeouts {
            startup_ms: 0,
            list_tools_ms: 0,
            call_ms,
            ..Default::default()
        }),
        enabled: true,
        ..Default::default()
    };
    let registry = RegistryHandle::new(RegistryView::from_specs([
        spec("mb", 0),
        spec("tight", 300),
    ]));
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let task = TaskPolicy {
        enabled: true,
        allowed_server_ids: vec!["mb".into(), "tight".into()],
        default_server_ids: vec!["mb".into(), "tight".into()],
        tool_allowlist: None,
        tool_denylist: vec!["spawn".into()],
        approval: Vec::new(),
    };
    let session = SessionPolicy::from_task(&task);
    Fixture {
        router: Router::new(connections.clone(), registry),
        connections,
        task,
        session,
    }
}

/// An OpenAI backend on `model`, not streaming.
pub fn backend(model: &ScriptedModel, max_retries: u32) -> OpenAiBackend {
    openai(model, false, max_retries)
}

pub fn openai(model: &ScriptedModel, stream: bool, max_retries: u32) -> OpenAiBackend {
    OpenAiBackend::new(OpenAiConfig {
        base_url: model.openai_url(),
        model: "scripted".into(),
        api_key: Some("sk-test-key".into()),
        timeout: Duration::from_secs(10),
        max_retries,
        stream,
    })
}

pub fn anthropic(model: &ScriptedModel, stream: bool, max_retries: u32) -> AnthropicBackend {
    AnthropicBackend::new(AnthropicConfig {
        base_url: model.anthropic_url(),
        model: "scripted".into(),
        api_key: Some("sk-ant-test".into()),
        max_tokens: 1024,
        timeout: Duration::from_secs(10),
        max_retries,
        stream,
        native_tool_search: false,
    })
}

/// The provider's rules held for every request the node sent.
pub fn assert_no_violations(model: &ScriptedModel) {
    assert_eq!(
        model.violations(),
        Vec::<String>::new(),
        "the node sent requests the provider refuses"
    );
}

pub fn limits() -> LoopLimits {
    LoopLimits {
        max_iterations: 8,
        max_total_tool_calls: 16,
        deadline: Instant::now() + Duration::from_secs(30),
    }
}

impl Fixture {
    /// Runs the loop from `messages`; returns the outcome and the history.
    pub async fn run(
        &self,
        backend: &dyn LlmBackend,
        messages: Vec<ChatMessage>,
        limits: LoopLimits,
    ) -> (LoopOutcome, Vec<ChatMessage>) {
        self.run_within(backend, messages, limits, &mut RunBudget::unlimited())
            .await
    }

    /// [`Fixture::run`] drawing on a run's `budget`.
    pub async fn run_within(
        &self,
        backend: &dyn LlmBackend,
        mut messages: Vec<ChatMessage>,
        limits: LoopLimits,
        budget: &mut RunBudget,
    ) -> (LoopOutcome, Vec<ChatMessage>) {
        let outcome = run_tool_loop(
            backend,
            &self.router,
            &self.task,
            &self.session,
            &mut messages,
            limits,
            budget,
        )
        .await;
        (outcome, messages)
    }
}

/// Every assistant tool call is answered by exactly one tool message.
pub fn assert_history_valid(messages: &[ChatMessage]) {
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            let answers: Vec<&str> = messages[i + 1..]
                .iter()
                .take_while(|m| m.role == Role::Tool)
                .filter_map(|m| m.tool_call_id.as_deref())
                .collect();
            let asked: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(answers, asked, "tool calls not answered one by one");
        }
    }
}
