//! A session's request params on the wire: each param as its provider
//! spells it, in both formats, streaming and not, accepted by the scripted
//! model (which checks them as the provider does); `tool_choice` forcing a
//! tool on the first request of the loop only; a param a provider cannot
//! honour refused before anything is sent; and the model refusing a param
//! out of the provider's range.

mod support;

use serde_json::json;
use spear_guest::request::{RequestParams, ToolChoice, ToolMode};
use spearlet::cchat::{
    run_send, GuestTools, LoopError, LoopOutcome, NoCallbacks, RunBudget, SendMode, SendSetup,
};
use spearlet::llm::{ChatMessage, ChatRequest, LlmBackend, LlmError};
use spearlet::tools::offered_name;
use support::*;

/// A send of `params` on `backend` over the fixture's servers.
fn setup<'a>(
    f: &'a Fixture,
    backend: &'a dyn LlmBackend,
    params: &'a RequestParams,
    mode: SendMode,
) -> SendSetup<'a> {
    SendSetup {
        prices: spearlet::llm::Prices::none(),
        backend,
        router: &f.router,
        task: &f.task,
        policy: &f.session,
        params,
        guest_tools: &NO_GUEST_TOOLS,
        mode,
        limits: limits(),
        search: None,
    }
}

static NO_GUEST_TOOLS: std::sync::LazyLock<GuestTools> =
    std::sync::LazyLock::new(GuestTools::default);

async fn send(setup: &SendSetup<'_>) -> LoopOutcome {
    let mut messages = vec![ChatMessage::user("go")];
    run_send(
        setup,
        &mut messages,
        &mut RunBudget::unlimited(),
        &mut NoCallbacks,
    )
    .await
}

fn params() -> RequestParams {
    RequestParams::new()
        .temperature(0.5)
        .top_p(0.9)
        .max_tokens(100)
        .stop(&["END"])
        // The compat form of an offered tool: renamed to what the model sees.
        .force_tool("mcp.mb.ok")
        .parallel_tool_calls(false)
}

#[tokio::test]
async fn every_param_is_mapped_per_provider_and_tool_choice_applies_once() {
    let f = fixture();
    let ok = offered_name("mb", "ok");
    let mut failures = Vec::new();
    for (anthropic, stream) in [(false, false), (false, true), (true, false), (true, true)] {
        let case = format!("anthropic {anthropic}, stream {stream}");
        let model = ScriptedModel::script(vec![
            Turn::calls(&[("call_1", &ok, json!({}))]),
            Turn::answer("{\"done\": true}"),
        ])
        .await;
        let llm: Box<dyn LlmBackend> = if anthropic {
            Box::new(support::anthropic(&model, stream, 0))
        } else {
            Box::new(support::openai(&model, stream, 0))
        };
        let mut p = params().json_schema(
            "done",
            json!({"type": "object", "properties": {"done": {"type": "boolean"}}}),
        );
        if !anthropic {
            p = p.seed(7);
        }
        let outcome = send(&setup(&f, llm.as_ref(), &p, SendMode::Auto)).await;
        let requests = model.requests();
        let (first, second) = (&requests[0].body, &requests[requests.len() - 1].body);
        let checks: Vec<(bool, String)> = if anthropic {
            vec![
                (
                    first["tool_choice"]
                        == json!({"type": "tool", "name": ok, "disable_parallel_tool_use": true}),
                    format!("first tool_choice {}", first["tool_choice"]),
                ),
                (
                    second["tool_choice"]
                        == json!({"type": "auto", "disable_parallel_tool_use": true}),
                    format!("second tool_choice {}", second["tool_choice"]),
                ),
                (
                    first["stop_sequences"] == json!(["END"]) && first["max_tokens"] == 100,
                    format!("stop/max {first}"),
                ),
                (
                    first["output_config"]["format"]["schema"]["type"] == "object",
                    format!("output_config {}", first["output_config"]),
                ),
            ]
        } else {
            vec![
                (
                    first["tool_choice"] == json!({"type": "function", "function": {"name": ok}}),
                    format!("first tool_choice {}", first["tool_choice"]),
                ),
                (
                    second.get("tool_choice").is_none(),
                    format!("second tool_choice {}", second["tool_choice"]),
                ),
                (
                    first["parallel_tool_calls"] == false && first["seed"] == 7,
                    format!("parallel/seed {first}"),
                ),
                (
                    first["stop"] == json!(["END"]) && first["max_tokens"] == 100,
                    format!("stop/max {first}"),
                ),
                (
                    first["response_format"]["json_schema"]["name"] == "done",
                    format!("response_format {}", first["response_format"]),
                ),
            ]
        };
        let mut all = checks;
        all.push((
            first["temperature"] == 0.5 && first["top_p"] == 0.9,
            format!("sampling {first}"),
        ));
        all.push((
            outcome.result.as_deref().ok() == Some("{\"done\": true}"),
            format!("result {:?}", outcome.result),
        ));
        all.push((requests.len() == 2, format!("{} requests", requests.len())));
        all.push((
            model.violations().is_empty(),
            format!("violations {:?}", model.violations()),
        ));
        failures.extend(
            all.into_iter()
                .filter(|(ok, _)| !ok)
                .map(|(_, why)| format!("{case}: {why}")),
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn what_a_provider_cannot_honour_is_refused_before_sending() {
    let f = fixture();
    let model = ScriptedModel::script(vec![]).await;
    let claude = support::anthropic(&model, false, 0);
    for (params, param) in [
        (RequestParams::new().seed(1), "seed"),
        (RequestParams::new().temperature(1.5), "temperature"),
        (
            RequestParams::new().response_format(spear_guest::ResponseFormat::JsonObject),
            "response_format",
        ),
    ] {
        let error = claude.check(&params).unwrap_err();
        assert_eq!(error.param, param);
        let outcome = send(&setup(&f, &claude, &params, SendMode::Once)).await;
        let why = outcome.result.unwrap_err();
        assert!(matches!(why, LoopError::Params(_)), "{why}");
        assert!(why.to_string().contains(param), "{why}");
    }
    // `required` with no tools offered, and a named tool nobody offers.
    let openai = support::openai(&model, false, 0);
    for params in [
        RequestParams::new().tool_choice(ToolChoice::Mode(ToolMode::Required)),
        RequestParams::new().force_tool("mcp.mb.no_such_tool"),
    ] {
        let outcome = send(&setup(&f, &openai, &params, SendMode::NoTools)).await;
        assert!(
            matches!(outcome.result, Err(LoopError::Params(_))),
            "{:?}",
            outcome.result
        );
    }
    assert!(model.requests().is_empty(), "nothing was sent");

    // Out of the provider's range, the provider refuses (and a test sees it).
    let hot = RequestParams::new().temperature(3.0);
    let messages = [ChatMessage::user("go")];
    let error = openai
        .complete(ChatRequest {
            messages: &messages,
            tools: &[],
            params: &hot,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::Provider { status: 400, .. }),
        "{error}"
    );
    assert_eq!(model.violations().len(), 1, "{:?}", model.violations());
    assert!(
        model.violations()[0].contains("temperature"),
        "{:?}",
        model.violations()
    );
}
