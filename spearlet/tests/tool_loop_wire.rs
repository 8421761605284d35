//! The auto tool-call loop over every wire format the node speaks: OpenAI
//! chat completions and Anthropic messages, each as one JSON body and as an
//! event stream whose deltas are assembled. Each case reports on its own.
//! Also: answers cut at the output-token limit, errors in the middle of a
//! stream, and the scripted model refusing a history the provider would.

mod support;

use serde_json::json;
use spearlet::cchat::LoopError;
use spearlet::llm::{ChatMessage, ChatRequest, LlmBackend, LlmError, StopReason, ToolCall};
use spearlet::tools::offered_name;
use support::*;

#[derive(Debug, Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
}

const WIRES: [(Wire, bool); 4] = [
    (Wire::OpenAi, false),
    (Wire::OpenAi, true),
    (Wire::Anthropic, false),
    (Wire::Anthropic, true),
];

fn backend_for(model: &ScriptedModel, wire: Wire, stream: bool) -> Box<dyn LlmBackend> {
    match wire {
        Wire::OpenAi => Box::new(openai(model, stream, 0)),
        Wire::Anthropic => Box::new(anthropic(model, stream, 0)),
    }
}

/// One tool call, then two in parallel, then an answer; in every format.
#[tokio::test]
async fn every_wire_format_runs_the_loop_with_a_valid_history() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let mut failures = Vec::new();
    for (wire, stream) in WIRES {
        let case = format!("{wire:?}, stream {stream}");
        let model = ScriptedModel::script(vec![
            Turn::calls(&[("call_1", &ok, json!({}))]),
            Turn::ToolCalls {
                text: "Checking both.".into(),
                calls: vec![
                    Call::new("call_2", &ok, json!({})),
                    Call::new("call_3", &huge, json!({"bytes": 4})),
                ],
            },
            Turn::answer("all done"),
        ])
        .await;
        let llm = backend_for(&model, wire, stream);
        let (outcome, messages) = f
            .run(
                llm.as_ref(),
                vec![ChatMessage::system("be brief"), ChatMessage::user("go")],
                limits(),
            )
            .await;
        let requests = model.requests();
        let checks = [
            (
                outcome.result.as_deref().ok() == Some("all done"),
                format!("result {:?}", outcome.result),
            ),
            (
                outcome.stop == StopReason::EndTurn,
                format!("stop {:?}", outcome.stop),
            ),
            (
                (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (30, 15),
                format!("usage {:?}", outcome.usage),
            ),
            (
                model.violations().is_empty(),
                format!("violations {:?}", model.violations()),
            ),
            (
                requests
                    .iter()
                    .all(|r| (r.body["stream"] == true) == stream),
                "stream flag".into(),
            ),
            (
                messages[4].tool_calls.get(1).map(|c| c.arguments.as_str())
                    == Some("{\"bytes\":4}"),
                format!("assembled arguments {:?}", messages.get(4)),
            ),
            (
                messages.last().and_then(|m| m.content.as_deref()) == Some("all done"),
                "history ends with the answer".into(),
            ),
        ];
        for (ok, what) in checks {
            if !ok {
                failures.push(format!("{case}: {what}"));
            }
        }
        assert_history_valid(&messages);
    }
    assert!(failures.is_empty(), "{failures:#?}");
    f.connections.shutdown().await;
}

/// Each provider's shape of what the node sends: Anthropic's system field,
/// headers and one user message holding all of a turn's tool results.
#[tokio::test]
async fn anthropic_requests_have_the_providers_shape() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let model = ScriptedModel::script(vec![
        Turn::calls(&[
            ("toolu_1", &ok, json!({})),
            ("toolu_2", &huge, json!({"bytes": 3})),
        ]),
        Turn::error(529, Some(0), "Overloaded"),
        Turn::answer("done"),
    ])
    .await;
    let llm = anthropic(&model, false, 2);
    let (outcome, _) = f
        .run(
            &llm,
            vec![ChatMessage::system("be brief"), ChatMessage::user("go")],
            limits(),
        )
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("done"));
    assert_no_violations(&model);
    let requests = model.requests();
    assert_eq!(requests[0].body["system"], "be brief");
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    let follow_up = &requests[2].body["messages"];
    assert_eq!(follow_up[1]["content"][1]["input"], json!({"bytes": 3}));
    let results = &follow_up[2];
    assert_eq!(results["role"], "user");
    assert_eq!(results["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(results["content"][1]["content"], "xxx");
    f.connections.shutdown().await;
}

/// A tool call cut by the token limit is never run and not kept; cut text is
/// the answer, marked as cut.
#[tokio::test]
async fn answers_cut_at_the_token_limit_are_handled_in_every_format() {
    let f = fixture();
    let huge = offered_name("mb", "huge");
    let mut failures = Vec::new();
    for (wire, stream) in WIRES {
        let case = format!("{wire:?}, stream {stream}");
        let cut_call = Turn::Truncated {
            text: "Let me".into(),
            call: Some((Call::new("call_cut", &huge, json!({"bytes": 123456})), 9)),
        };
        let cut_text = Turn::Truncated {
            text: "The answer is forty".into(),
            call: None,
        };
        let model = ScriptedModel::script(vec![cut_call, cut_text]).await;
        let llm = backend_for(&model, wire, stream);
        let history = vec![ChatMessage::user("go")];
        let (outcome, messages) = f.run(llm.as_ref(), history.clone(), limits()).await;
        if !matches!(outcome.result, Err(LoopError::CutToolCall)) || !outcome.trace.is_empty() {
            failures.push(format!(
                "{case}: a cut tool call gave {:?}, trace {:?}",
                outcome.result, outcome.trace
            ));
        }
        if messages != history {
            failures.push(format!("{case}: the cut answer was kept: {messages:?}"));
        }
        let (outcome, _) = f.run(llm.as_ref(), history, limits()).await;
        if outcome.result.as_deref().ok() != Some("The answer is forty")
            || outcome.stop != StopReason::MaxTokens
        {
            failures.push(format!(
                "{case}: cut text gave {:?} / {:?}",
                outcome.result, outcome.stop
            ));
        }
        if !model.violations().is_empty() {
            failures.push(format!("{case}: {:?}", model.violations()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let sentence = LoopError::CutToolCall.to_string();
    assert!(
        sentence.contains("max_tokens") && sentence.contains("no call"),
        "{sentence}"
    );
    f.connections.shutdown().await;
}

/// An error event in the middle of a stream ends the send with the
/// provider's sentence; the partial answer is not kept.
#[tokio::test]
async fn an_error_mid_stream_is_a_clear_result() {
    let f = fixture();
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let model = ScriptedModel::script(vec![Turn::FailMidStream {
            text: "I was saying".into(),
            message: "Overloaded right now".into(),
        }])
        .await;
        let llm = backend_for(&model, wire, true);
        let history = vec![ChatMessage::user("go")];
        let (outcome, messages) = f.run(llm.as_ref(), history.clone(), limits()).await;
        match &outcome.result {
            Err(LoopError::Llm(LlmError::Interrupted(message))) => {
                assert_eq!(message, "Overloaded right now", "{wire:?}")
            }
            other => panic!("{wire:?}: {other:?}"),
        }
        let sentence = outcome.result.unwrap_err().to_string();
        assert!(
            sentence.contains("in the middle of its answer"),
            "{sentence}"
        );
        assert_eq!(messages, history, "{wire:?}");
    }
    f.connections.shutdown().await;
}

/// The scripted model is a real check: a history the provider refuses is
/// refused, in both formats (a tool result nobody asked for).
#[tokio::test]
async fn the_scripted_model_refuses_what_the_provider_would() {
    let stray = vec![
        ChatMessage::user("go"),
        ChatMessage::assistant(
            String::new(),
            vec![ToolCall {
                id: "asked".into(),
                name: "t".into(),
                arguments: "{}".into(),
            }],
        ),
        ChatMessage::tool("other", "result".into()),
    ];
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let model = ScriptedModel::script(vec![Turn::answer("never")]).await;
        let llm = backend_for(&model, wire, false);
        let error = llm
            .complete(ChatRequest::plain(&stray, &[]))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::Provider { status: 400, .. }),
            "{wire:?}: {error}"
        );
        let violations = model.violations();
        assert_eq!(violations.len(), 1, "{wire:?}: {violations:?}");
        assert!(
            violations[0].contains("other") || violations[0].contains("asked"),
            "{violations:?}"
        );
    }
}

/// A model that answers with nothing leaves a history both providers still
/// accept on the session's next send.
#[tokio::test]
async fn an_empty_answer_keeps_the_history_valid_for_the_next_send() {
    let f = fixture();
    for (wire, stream) in WIRES {
        let model = ScriptedModel::script(vec![Turn::answer(""), Turn::answer("second")]).await;
        let llm = backend_for(&model, wire, stream);
        let (outcome, mut messages) = f
            .run(llm.as_ref(), vec![ChatMessage::user("first")], limits())
            .await;
        assert_eq!(
            outcome.result.as_deref().ok(),
            Some(""),
            "{wire:?} {stream}"
        );
        messages.push(ChatMessage::user("again"));
        let (outcome, _) = f.run(llm.as_ref(), messages, limits()).await;
        assert_eq!(
            outcome.result.as_deref().ok(),
            Some("second"),
            "{wire:?} {stream}: {:?}",
            model.violations()
        );
        assert_no_violations(&model);
    }
    f.connections.shutdown().await;
}
