//! Tool search (`mcp.tool_search`) against the scripted model and nine
//! real MCP servers of twenty tools each (`tests/peers/catalog_server.py`
//! over stdio): the first request carries the search tool, not the 180
//! definitions; what a search finds becomes callable from the next
//! request; a tool outside the session's policy is never found and its
//! call is refused; searches count as tool calls. The same on an Anthropic
//! backend that searches natively (deferred tools, the provider's blocks
//! sent back as they came).

mod support;

#[path = "support/catalog_fleet.rs"]
mod catalog_fleet;

use catalog_fleet::catalog_fleet;
use serde_json::{json, Value};
use spear_guest::request::RequestParams;
use spearlet::cchat::{
    run_send, GuestTools, LoopLimits, NoCallbacks, RunBudget, SendMode, SendSetup,
};
use spearlet::llm::{AnthropicBackend, AnthropicConfig, ChatMessage, LlmBackend};
use spearlet::tool_policy::{SessionPolicy, TaskPolicy, ToolSearch};
use spearlet::tools::{offered_name, Router, SEARCH_TOOL};
use support::*;

struct Fleet {
    router: Router,
    task: TaskPolicy,
}

async fn fleet() -> Fleet {
    let (router, task) = catalog_fleet().await;
    Fleet { router, task }
}

impl Fleet {
    async fn send(
        &self,
        backend: &dyn LlmBackend,
        policy: &SessionPolicy,
        limits: LoopLimits,
    ) -> spearlet::cchat::LoopOutcome {
        let params = RequestParams::default();
        let guest_tools = GuestTools::default();
        let setup = SendSetup {
            prices: spearlet::llm::Prices::none(),
            backend,
            router: &self.router,
            task: &self.task,
            policy,
            params: &params,
            guest_tools: &guest_tools,
            mode: SendMode::Auto,
            limits,
            search: None,
        };
        let mut messages = vec![ChatMessage::user("tidy up the release")];
        let outcome = run_send(
            &setup,
            &mut messages,
            &mut RunBudget::unlimited(),
            &mut NoCallbacks,
        )
        .await;
        assert_history_valid(&messages);
        outcome
    }
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_model_searches_then_calls_what_it_found_and_nothing_else() {
    let fleet = fleet().await;
    // The session: no mail server, and no tool that deletes.
    let mut policy = SessionPolicy::from_task(&fleet.task);
    policy.server_ids.retain(|s| s != "mail");
    policy.tool_denylist = vec!["delete_*".into(), "drop_table".into()];
    policy.tool_search = ToolSearch::On;

    let extract = offered_name("files", "extract_archive");
    let delete = offered_name("files", "delete_file");
    let send_email = offered_name("mail", "send_email");
    let model = ScriptedModel::script(vec![
        // A search, and a call of a tool not obtained yet.
        Turn::calls(&[
            ("s1", SEARCH_TOOL, json!({"query": "unzip archive"})),
            ("c1", &extract, json!({"archive": "r.zip"})),
        ]),
        // The tool found; searches for what the session may not use; calls
        // of those tools by their names.
        Turn::calls(&[
            (
                "c2",
                &extract,
                json!({"archive": "r.zip", "destination": "/tmp/r; $(reboot)"}),
            ),
            (
                "s2",
                SEARCH_TOOL,
                json!({"query": "delete remove file permanently", "limit": 10}),
            ),
            (
                "s3",
                SEARCH_TOOL,
                json!({"query": "send an email message to recipients", "limit": 10}),
            ),
            ("c3", &delete, json!({"path": "/etc/passwd"})),
            ("c4", &send_email, json!({"to": "x@example.com"})),
        ]),
        Turn::answer("unpacked"),
    ])
    .await;
    let outcome = fleet.send(&backend(&model, 0), &policy, limits()).await;
    assert_eq!(outcome.result.as_deref().ok(), Some("unpacked"));
    assert_no_violations(&model);

    let requests = model.requests();
    // First request: the search tool alone, not the 156 definitions the
    // session may use (160 on its servers, less four that delete).
    assert_eq!(tool_names(&requests[0].body), [SEARCH_TOOL]);
    let description = requests[0].body["tools"][0]["function"]["description"]
        .as_str()
        .unwrap();
    assert!(description.contains("the 156 tools"), "{description}");
    assert!(!description.contains("mail"), "{description}");
    // Second request: the search tool and what the first search found,
    // with their full definitions.
    let second = tool_names(&requests[1].body);
    assert_eq!(second[0], SEARCH_TOOL);
    assert!(second.contains(&extract), "{second:?}");
    assert!(second.len() <= 6, "{second:?}");
    let definition = requests[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == extract.as_str())
        .unwrap();
    assert_eq!(
        definition["function"]["parameters"]["properties"]["destination"]["type"],
        "string"
    );

    let trace = |id: &str| outcome.trace.iter().find(|t| t.tool_call_id == id).unwrap();
    let found = |id: &str| -> Vec<String> {
        trace(id)
            .search
            .as_ref()
            .unwrap()
            .found
            .iter()
            .map(|f| format!("{}/{}", f.server, f.tool))
            .collect()
    };
    assert_eq!(found("s1")[0], "files/extract_archive");
    assert_eq!(trace("s1").search.as_ref().unwrap().query, "unzip archive");
    // Called before it was obtained: refused like any unknown tool.
    assert!(trace("c1").is_error && trace("c1").executed.is_none());
    // Called after: it ran, with its arguments as written.
    assert!(!trace("c2").is_error);
    assert_eq!(
        trace("c2").executed.as_ref().map(|t| t.tool.as_str()),
        Some("extract_archive")
    );
    let results: Vec<&str> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(results
        .iter()
        .any(|r| r.starts_with("files/extract_archive ran with") && r.contains("$(reboot)")));
    // Searches never find what the session may not use…
    for id in ["s2", "s3"] {
        let found = found(id);
        assert!(!found.is_empty(), "{id} found nothing");
        assert!(
            found.iter().all(|f| !f.starts_with("mail/")
                && !f.contains("/delete_")
                && f != "database/drop_table"),
            "{id}: {found:?}"
        );
    }
    // …and calls of those tools by name are refused.
    for id in ["c3", "c4"] {
        assert!(trace(id).is_error && trace(id).executed.is_none(), "{id}");
    }
    assert!(
        results
            .iter()
            .filter(|r| r.contains("was not offered"))
            .count()
            >= 3,
        "{results:?}"
    );
    // What the searches obtained stays for the session's next send.
    let search = outcome.search.as_ref().unwrap();
    assert!(search.visible().tools.iter().any(|t| t.name == extract));
}

#[tokio::test]
async fn searches_count_as_tool_calls() {
    let fleet = fleet().await;
    let mut policy = SessionPolicy::from_task(&fleet.task);
    policy.tool_search = ToolSearch::On;
    let model = ScriptedModel::script(vec![Turn::calls(&[
        ("s1", SEARCH_TOOL, json!({"query": "git log"})),
        ("s2", SEARCH_TOOL, json!({"query": "git blame"})),
    ])])
    .await;
    let limits = LoopLimits {
        max_total_tool_calls: 1,
        ..limits()
    };
    let outcome = fleet.send(&backend(&model, 0), &policy, limits).await;
    let error = outcome.result.unwrap_err().to_string();
    assert!(error.contains("max_total_tool_calls"), "{error}");
    assert!(outcome.trace[0].search.is_some() && !outcome.trace[0].is_error);
    assert!(outcome.trace[1].is_error && outcome.trace[1].search.is_none());
}

#[tokio::test]
async fn auto_searches_with_many_tools_only_and_off_sends_them_all() {
    let fleet = fleet().await;
    let auto = SessionPolicy::from_task(&fleet.task);
    let off = SessionPolicy {
        tool_search: ToolSearch::Off,
        ..auto.clone()
    };
    let few = SessionPolicy {
        server_ids: vec!["git".into()],
        ..auto.clone()
    };
    let model = ScriptedModel::script(vec![
        Turn::answer("a"),
        Turn::answer("b"),
        Turn::answer("c"),
        Turn::answer("d"),
    ])
    .await;
    for policy in [&auto, &off, &few] {
        fleet.send(&backend(&model, 0), policy, limits()).await;
    }
    // Anthropic's wire format takes the search tool too.
    fleet
        .send(&anthropic(&model, false, 0), &auto, limits())
        .await;
    assert_no_violations(&model);
    let requests = model.requests();
    assert_eq!(tool_names(&requests[0].body), [SEARCH_TOOL]);
    let all = tool_names(&requests[1].body);
    assert_eq!(all.len(), 180);
    assert!(!all.contains(&SEARCH_TOOL.to_string()));
    assert_eq!(tool_names(&requests[2].body).len(), 20);
    let anthropic: Vec<&str> = requests[3].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(anthropic, [SEARCH_TOOL]);
    let (on, off) = (body_bytes(&requests[0].body), body_bytes(&requests[1].body));
    assert!(on * 5 < off, "search on {on} bytes, off {off}");
}

fn body_bytes(body: &Value) -> usize {
    body.to_string().len()
}

/// An Anthropic backend that searches natively (`tool_search = "native"`).
fn anthropic_native(model: &ScriptedModel) -> AnthropicBackend {
    anthropic_native_streaming(model, false)
}

fn anthropic_native_streaming(model: &ScriptedModel, stream: bool) -> AnthropicBackend {
    AnthropicBackend::new(AnthropicConfig {
        base_url: model.anthropic_url(),
        model: "scripted".into(),
        api_key: Some("sk-ant-test".into()),
        max_tokens: 1024,
        timeout: std::time::Duration::from_secs(10),
        max_retries: 0,
        stream,
        native_tool_search: true,
    })
}

#[tokio::test]
async fn anthropic_searches_natively_within_the_session_policy() {
    native_search_within_the_session_policy(false).await;
}

#[tokio::test]
async fn anthropic_searches_natively_in_a_streamed_answer_too() {
    native_search_within_the_session_policy(true).await;
}

async fn native_search_within_the_session_policy(stream: bool) {
    let fleet = fleet().await;
    let mut policy = SessionPolicy::from_task(&fleet.task);
    policy.tool_denylist = vec!["delete_*".into()];
    policy.tool_search = ToolSearch::On;
    let extract = offered_name("files", "extract_archive");
    let delete = offered_name("files", "delete_file");
    let git_log = offered_name("git", "git_log");
    let model = ScriptedModel::script(vec![
        // The provider finds two tools; it was never sent the denied one,
        // so it cannot reference it. The answer calls what it found, and a
        // tool it did not find.
        Turn::native_search(
            "unzip archive",
            &[&extract, &delete],
            &[
                ("c1", &extract, json!({"archive": "r.zip"})),
                ("c2", &git_log, json!({"repo_path": "/srv"})),
            ],
        ),
        Turn::answer("unpacked"),
    ])
    .await;
    let outcome = fleet
        .send(
            &anthropic_native_streaming(&model, stream),
            &policy,
            limits(),
        )
        .await;
    assert_eq!(outcome.result.as_deref().ok(), Some("unpacked"));
    assert_no_violations(&model);

    let requests = model.requests();
    assert_eq!(
        requests[0].header("anthropic-beta"),
        Some("advanced-tool-use-2025-11-20")
    );
    let tools = requests[0].body["tools"].as_array().unwrap();
    assert_eq!(tools[0]["type"], "tool_search_tool_bm25_20251119");
    // Every tool the session may use, deferred; none it may not.
    let deferred: Vec<&str> = tools[1..]
        .iter()
        .filter(|t| t["defer_loading"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(deferred.len(), 176, "180 less the four that delete");
    assert_eq!(tools.len(), 177);
    assert!(!deferred.contains(&delete.as_str()));

    // The provider's search: traced and counted; what it found ran in the
    // same answer; what it did not find was refused like an unknown tool.
    let search = outcome.trace[0].search.as_ref().unwrap();
    assert_eq!(search.query, "unzip archive");
    let found: Vec<&str> = search.found.iter().map(|f| f.tool.as_str()).collect();
    assert_eq!(found, ["extract_archive"]);
    let call = |id: &str| outcome.trace.iter().find(|t| t.tool_call_id == id).unwrap();
    assert!(!call("c1").is_error && call("c1").executed.is_some());
    assert!(call("c2").is_error && call("c2").executed.is_none());

    // The next request carries the provider's blocks back as they came,
    // and the same tools, all deferred (the provider loads the found one
    // from the history's reference).
    let second = &requests[1].body;
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    let kinds: Vec<&str> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "server_tool_use",
            "tool_search_tool_result",
            "tool_use",
            "tool_use"
        ]
    );
    assert_eq!(second["tools"], requests[0].body["tools"]);
}

#[tokio::test]
async fn a_native_search_past_the_tool_call_limit_ends_the_send() {
    let fleet = fleet().await;
    let mut policy = SessionPolicy::from_task(&fleet.task);
    policy.tool_search = ToolSearch::On;
    let extract = offered_name("files", "extract_archive");
    let model = ScriptedModel::script(vec![Turn::native_search(
        "unzip",
        &[&extract],
        &[("c1", &extract, json!({}))],
    )])
    .await;
    let limits = LoopLimits {
        max_total_tool_calls: 0,
        ..limits()
    };
    let outcome = fleet.send(&anthropic_native(&model), &policy, limits).await;
    let error = outcome.result.unwrap_err().to_string();
    assert!(error.contains("max_total_tool_calls"), "{error}");
    assert!(outcome.trace.is_empty(), "{:?}", outcome.trace);
}
