//! The auto tool-call loop over the other wire formats: Anthropic messages,
//! and streamed answers (OpenAI chunks, Anthropic events) whose tool-call
//! deltas are assembled.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use spearlet::llm::{AnthropicBackend, AnthropicConfig, ChatMessage, OpenAiBackend, OpenAiConfig};
use spearlet::tools::offered_name;
use support::*;

#[tokio::test]
async fn the_loop_speaks_anthropic_messages() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let overloaded = (
        529,
        Some("0"),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let (script, addr) = serve(vec![
        anthropic_tool_use(&[
            ("toolu_1", &ok, json!({})),
            ("toolu_2", &huge, json!({"bytes": 3})),
        ]),
        overloaded,
        anthropic_answer("done"),
    ])
    .await;
    let backend = AnthropicBackend::new(AnthropicConfig {
        base_url: format!("http://{addr}"),
        model: "scripted".into(),
        api_key: Some("sk-ant-test".into()),
        max_tokens: 1024,
        timeout: Duration::from_secs(10),
        max_retries: 2,
        stream: false,
    });
    let (outcome, messages) = f
        .run(
            &backend,
            vec![ChatMessage::system("be brief"), ChatMessage::user("go")],
            limits(),
        )
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("done"));
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (80, 13)
    );
    assert_history_valid(&messages);

    let requests = script.requests.lock().clone();
    let first = &requests[0];
    assert_eq!(first["system"], "be brief");
    assert_eq!(first["header:x-api-key"], "sk-ant-test");
    assert_eq!(first["header:anthropic-version"], "2023-06-01");
    assert!(first["tools"][0]["input_schema"].is_object());
    // After the tool turn: the assistant's tool_use blocks, then ONE user
    // message with both tool_result blocks.
    let follow_up = &requests[2]["messages"];
    let assistant = &follow_up[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][2]["input"], json!({"bytes": 3}));
    let results = &follow_up[2];
    assert_eq!(results["role"], "user");
    assert_eq!(results["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(results["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(results["content"][0]["content"], "ok");
    assert_eq!(results["content"][1]["content"], "xxx");
    f.connections.shutdown().await;
}

/// An event stream body: each value a `data:` event (an optional event name
/// first), then `[DONE]` for OpenAI.

#[tokio::test]
async fn streamed_tool_call_deltas_are_assembled_openai() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let huge = offered_name("mb", "huge");
    let chunk = |delta: Value| {
        (
            None,
            json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
        )
    };
    let first = sse(
        &[
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_s1", "type": "function", "function": {"name": ok, "arguments": ""}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_s2", "type": "function", "function": {"name": huge, "arguments": "{\"bytes\""}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})),
            chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": ": 4}"}}]})),
            (
                None,
                json!({"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 6}}),
            ),
        ],
        true,
    );
    let second = sse(
        &[
            chunk(json!({"role": "assistant", "content": "stream"})),
            chunk(json!({"content": "ed done"})),
            (
                None,
                json!({"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 2}}),
            ),
        ],
        true,
    );
    let (script, addr) = serve(vec![first, second]).await;
    let backend = OpenAiBackend::new(OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        model: "scripted".into(),
        api_key: None,
        timeout: Duration::from_secs(10),
        max_retries: 0,
        stream: true,
    });
    let (outcome, messages) = f
        .run(&backend, vec![ChatMessage::user("go")], limits())
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("streamed done"));
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (32, 8)
    );
    assert_history_valid(&messages);
    assert_eq!(messages[1].tool_calls[1].arguments, "{\"bytes\": 4}");
    let requests = script.requests.lock().clone();
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(requests[0]["stream_options"]["include_usage"], true);
    let tool_texts: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(tool_texts, vec!["ok", "xxxx"]);
    f.connections.shutdown().await;
}

#[tokio::test]
async fn streamed_tool_use_is_assembled_anthropic() {
    let f = fixture();
    let huge = offered_name("mb", "huge");
    let first = sse(
        &[
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 40, "output_tokens": 1}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_s", "name": huge, "input": {}}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"by"}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "tes\": 2}"}}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 1}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 15}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ],
        false,
    );
    let second = sse(
        &[
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 60, "output_tokens": 1}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "two x"}}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ],
        false,
    );
    let (script, addr) = serve(vec![first, second]).await;
    let backend = AnthropicBackend::new(AnthropicConfig {
        base_url: format!("http://{addr}"),
        model: "scripted".into(),
        api_key: None,
        max_tokens: 256,
        timeout: Duration::from_secs(10),
        max_retries: 0,
        stream: true,
    });
    let (outcome, messages) = f
        .run(&backend, vec![ChatMessage::user("go")], limits())
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("two x"));
    assert_eq!(
        (outcome.usage.prompt_tokens, outcome.usage.completion_tokens),
        (100, 18)
    );
    assert_history_valid(&messages);
    let requests = script.requests.lock().clone();
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(
        requests[1]["messages"][1]["content"][1]["input"],
        json!({"bytes": 2})
    );
    assert_eq!(requests[1]["messages"][2]["content"][0]["content"], "xx");
    f.connections.shutdown().await;
}
