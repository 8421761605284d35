//! The auto tool-call loop against the scripted model (OpenAI chat
//! completions here; other wire formats in `tool_loop_wire.rs`) and a real
//! MCP server over stdio:
//! single and parallel calls, tool errors, unknown and denied names, limits
//! mid-batch, provider retries and failures.

mod support;

use serde_json::{json, Value};
use spearlet::cchat::{BudgetKind, BudgetLimits, LoopError, LoopLimits, RunBudget};
use spearlet::llm::{ChatMessage, Role};
use spearlet::tools::offered_name;
use support::*;

#[tokio::test]
async fn single_and_parallel_calls_then_an_answer() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let model = ScriptedModel::script(vec![
        Turn::calls(&[("call_1", &ok, json!({}))]),
        Turn::calls(&[
            ("call_2", &ok, json!({})),
            ("call_3", &huge, json!({"bytes": 12})),
        ]),
        Turn::answer("all done"),
    ])
    .await;
    let (outcome, messages) = f
        .run(
            &backend(&model, 0),
            vec![ChatMessage::system("be brief"), ChatMessage::user("go")],
            limits(),
        )
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("all done"));
    assert_eq!(outcome.iterations, 3);
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (30, 15)
    );
    assert_eq!(outcome.trace.len(), 3);
    assert!(outcome
        .trace
        .iter()
        .all(|t| !t.is_error && t.executed.is_some()));
    assert_history_valid(&messages);
    assert_no_violations(&model);

    let requests = model.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-test-key")
    );
    // The tools were injected with their offered names; denied ones were not.
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&ok.as_str()) && !names.contains(&offered_name("mb", "env").as_str()));
    assert!(!names.contains(&offered_name("mb", "spawn").as_str()));
    // The third request carries both results, each under its tool_call_id.
    let last: Vec<&Value> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(last.len(), 3);
    assert_eq!(
        (
            last[1]["tool_call_id"].as_str(),
            last[1]["content"].as_str()
        ),
        (Some("call_2"), Some("ok"))
    );
    assert_eq!(
        (
            last[2]["tool_call_id"].as_str(),
            last[2]["content"].as_str()
        ),
        (Some("call_3"), Some("xxxxxxxxxxxx"))
    );
    f.connections.shutdown().await;
}

#[tokio::test]
async fn errors_unknown_and_denied_tools_are_answered_never_run() {
    let f = fixture();
    let model = ScriptedModel::script(vec![
        Turn::calls(&[
            ("c1", &offered_name("tight", "hang"), json!({})),
            ("c2", "mcp__invented__name", json!({})),
            ("c3", &offered_name("mb", "env"), json!({})),
            ("c4", "mcp.mb.spawn", json!({})),
        ]),
        Turn::answer("recovered"),
    ])
    .await;
    let (outcome, messages) = f
        .run(&backend(&model, 0), vec![ChatMessage::user("go")], limits())
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("recovered"));
    assert_history_valid(&messages);
    assert_no_violations(&model);
    let trace = &outcome.trace;
    assert!(
        trace[0].is_error && trace[0].executed.is_some(),
        "the hung call ran and timed out"
    );
    for t in &trace[1..] {
        assert!(
            t.is_error && t.executed.is_none(),
            "{} must not run",
            t.name
        );
    }
    let tool_texts: Vec<String> = model.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(tool_texts[0].contains("timed out"), "{tool_texts:?}");
    assert!(tool_texts[1].contains("not offered"), "{tool_texts:?}");
    f.connections.shutdown().await;
}

#[tokio::test]
async fn limits_end_the_loop_with_a_valid_history() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let model = ScriptedModel::script(vec![Turn::calls(&[
        ("a", &ok, json!({})),
        ("b", &ok, json!({})),
        ("c", &ok, json!({})),
    ])])
    .await;
    let tight = LoopLimits {
        max_total_tool_calls: 2,
        ..limits()
    };
    let (outcome, messages) = f
        .run(&backend(&model, 0), vec![ChatMessage::user("go")], tight)
        .await;
    assert!(
        matches!(outcome.result, Err(LoopError::MaxToolCalls(2))),
        "{:?}",
        outcome.result
    );
    assert_history_valid(&messages);
    assert_no_violations(&model);
    assert_eq!(
        outcome
            .trace
            .iter()
            .filter(|t| t.executed.is_some())
            .count(),
        2
    );
    assert!(messages
        .last()
        .unwrap()
        .content
        .as_deref()
        .unwrap()
        .contains("max_total_tool_calls"));

    let model = ScriptedModel::script(
        (0..5)
            .map(|i| Turn::calls(&[(["x", "y", "z", "u", "v"][i], &ok, json!({}))]))
            .collect(),
    )
    .await;
    let short = LoopLimits {
        max_iterations: 2,
        ..limits()
    };
    let (outcome, messages) = f
        .run(&backend(&model, 0), vec![ChatMessage::user("go")], short)
        .await;
    assert!(
        matches!(outcome.result, Err(LoopError::MaxIterations(2))),
        "{:?}",
        outcome.result
    );
    assert_history_valid(&messages);
    assert_no_violations(&model);
    assert_eq!(messages.last().unwrap().role, Role::Tool);
    f.connections.shutdown().await;
}

#[tokio::test]
async fn provider_429_is_retried_and_500_to_the_end_is_a_clear_error() {
    let f = fixture();
    let busy = Turn::error(429, Some(0), "Rate limit reached");
    let model = ScriptedModel::script(vec![busy, Turn::answer("after the wait")]).await;
    let (outcome, _) = f
        .run(&backend(&model, 3), vec![ChatMessage::user("go")], limits())
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("after the wait"));
    assert_eq!(model.requests().len(), 2);

    let broken = || Turn::error(500, None, "upstream exploded");
    let model = ScriptedModel::script(vec![broken(), broken(), broken()]).await;
    let (outcome, messages) = f
        .run(&backend(&model, 2), vec![ChatMessage::user("go")], limits())
        .await;
    let error = outcome.result.unwrap_err().to_string();
    assert!(
        error.contains("500") && error.contains("upstream exploded"),
        "{error}"
    );
    assert!(!error.contains("sk-test-key"));
    assert_eq!(model.requests().len(), 3, "one try and two retries");
    assert_eq!(
        messages.len(),
        1,
        "a failed send leaves the history as it was"
    );
    f.connections.shutdown().await;
}

/// Run budgets span sends: what one send spent, the next cannot, and a
/// budget that runs out mid-loop still leaves a valid history.
#[tokio::test]
async fn run_budgets_hold_across_sends_with_a_valid_history() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let budget = |tool_calls, model_requests, host_memory_bytes| {
        RunBudget::new(BudgetLimits {
            host_memory_bytes,
            model_requests,
            tokens: u64::MAX,
            tool_calls,
        })
    };

    // Tool calls: 2 in the first send, 1 of 2 in the second.
    let mut run = budget(3, 100, u64::MAX);
    let model = ScriptedModel::script(vec![
        Turn::calls(&[("a", &ok, json!({})), ("b", &ok, json!({}))]),
        Turn::answer("first done"),
        Turn::calls(&[("c", &ok, json!({})), ("d", &ok, json!({}))]),
    ])
    .await;
    let llm = backend(&model, 0);
    let (outcome, _) = f
        .run_within(&llm, vec![ChatMessage::user("one")], limits(), &mut run)
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("first done"));
    let (outcome, messages) = f
        .run_within(&llm, vec![ChatMessage::user("two")], limits(), &mut run)
        .await;
    match &outcome.result {
        Err(LoopError::Budget(spent)) => assert_eq!(spent.kind, BudgetKind::ToolCalls),
        other => panic!("{other:?}"),
    }
    assert_history_valid(&messages);
    assert_no_violations(&model);
    let refused = messages.last().unwrap().content.clone().unwrap_or_default();
    assert!(refused.contains("limits.max_tool_calls"), "{refused}");
    assert_eq!(run.used(BudgetKind::ToolCalls), 3);
    assert_eq!(run.used(BudgetKind::ModelRequests), 3);

    // Model requests: the second request of a loop is refused before it is sent.
    let mut run = budget(100, 1, u64::MAX);
    let model = ScriptedModel::script(vec![
        Turn::calls(&[("e", &ok, json!({}))]),
        Turn::answer("never"),
    ])
    .await;
    let (outcome, messages) = f
        .run_within(
            &backend(&model, 0),
            vec![ChatMessage::user("go")],
            limits(),
            &mut run,
        )
        .await;
    match &outcome.result {
        Err(LoopError::Budget(spent)) => assert_eq!(spent.kind, BudgetKind::ModelRequests),
        other => panic!("{other:?}"),
    }
    assert_history_valid(&messages);
    assert_no_violations(&model);
    assert_eq!(model.requests().len(), 1, "nothing sent past the budget");

    // Host memory: a tool result that does not fit is not kept; the call is
    // still answered and the loop ends.
    let mut run = budget(100, 100, 4_000);
    let model = ScriptedModel::script(vec![
        Turn::calls(&[("f", &huge, json!({"bytes": 100_000}))]),
        Turn::answer("never"),
    ])
    .await;
    let (outcome, messages) = f
        .run_within(
            &backend(&model, 0),
            vec![ChatMessage::user("go")],
            limits(),
            &mut run,
        )
        .await;
    match &outcome.result {
        Err(LoopError::Budget(spent)) => assert_eq!(spent.kind, BudgetKind::HostMemory),
        other => panic!("{other:?}"),
    }
    assert_history_valid(&messages);
    assert_no_violations(&model);
    let kept: usize = messages.iter().map(ChatMessage::footprint).sum();
    assert!(
        kept < 4_000 + 1_000,
        "the history stays near the budget: {kept}"
    );
    f.connections.shutdown().await;
}
