//! Agents built as WebAssembly components (the world in
//! wit/spear-agent.wit) with the real toolchains — componentize-py for
//! Python, componentize-js for JavaScript and TypeScript — registered with
//! `sms tasks register` and invoked through SMS on a real node against
//! the real filesystem MCP server, the model scripted by `replay-llm`:
//! the fs-agents answer from the file they read; a guest tool of each
//! language is called by the model and its result reaches the answer; a
//! widening write raises the SDK's `Refused` with the node's sentence;
//! hostile guests of each language end at their limits, and the node
//! serves an honest guest after them; a component importing what the
//! world lacks is refused at registration.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::components::{calls_guest_tool, js_agent, python_agent};
use spear_tests::tasks::{
    cluster_opts, fs_task, invoke_json, register, repo_file, Cluster, ClusterOptions,
};
use spear_tests::wait::eventually;

/// The languages whose agents are components.
#[derive(Clone, Copy, Debug)]
enum Lang {
    Python,
    Js,
}

impl Lang {
    /// Builds `app` (an example of the SDK, or a hostile guest of
    /// tests/guests) into the cluster's module directory.
    fn build(self, c: &Cluster, app: &str) -> PathBuf {
        let (sdk, tests) = match self {
            Lang::Python => ("sdk-guest/python/examples", "tests/guests/python"),
            Lang::Js => ("sdk-guest/js/examples", "tests/guests/js"),
        };
        let dir = repo_file(if app == "hostile" { tests } else { sdk });
        match self {
            Lang::Python => python_agent(&dir, app, &c.modules),
            Lang::Js => {
                let file = if app.ends_with("_ts") {
                    format!("{}.ts", app.trim_end_matches("_ts"))
                } else {
                    format!("{app}.js")
                };
                js_agent(&dir.join(file), &format!("js-{app}"), &c.modules)
            }
        }
    }
}

/// A component is megabytes of interpreter: its first compile, with the
/// suite's other tests on the same cores, may take minutes (once per
/// node; its compiled form is kept).
const COMPILE_TIME: &str = "[guests]\ncompile_timeout_ms = 600000\n";

/// Registers `module` as task `id` with `config`; register names the kind.
fn register_component(c: &Cluster, id: &str, module: &Path, config: &Value) {
    let (code, out, err) = register(c, id, module, config, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("(component)"),
        "register names the kind: {out}{err}"
    );
}

/// A task with room for a component's first compile (SMS waits a run's
/// wall clock plus a margin, and the compile comes first).
fn roomy(mut config: Value) -> Value {
    config["limits"] = json!({"wall_ms": 600000});
    config
}

#[test]
fn python_and_js_guest_tools_are_called_by_the_model_and_their_results_reach_the_answer() {
    let work = tempfile::tempdir().unwrap();
    let recording = calls_guest_tool(
        work.path(),
        "word_count",
        r#"{"text": "one two three four"}"#,
    );
    let c = cluster_opts(
        "unused",
        ClusterOptions {
            models: vec![("words", recording)],
            node_toml: COMPILE_TIME,
            ..Default::default()
        },
    );
    let mut config = roomy(fs_task());
    config["llm"] = json!({"backend": "words"});
    for lang in [Lang::Python, Lang::Js] {
        let id = format!("{lang:?}-tool").to_lowercase();
        register_component(&c, &id, &lang.build(&c, "tool_agent"), &config);
        let run = invoke_json(&c, &[&id]);
        assert_eq!(run["ok"], true, "{lang:?}: {run}");
        assert!(
            run["stdout"]
                .as_str()
                .unwrap()
                .contains("the guest counted: 4 words"),
            "{lang:?}: {run}"
        );
    }
}

#[test]
fn js_and_ts_fs_agents_answer_from_the_file_and_foreign_imports_are_refused() {
    let c = cluster_opts(
        "the notes say: Thursday",
        ClusterOptions {
            node_toml: COMPILE_TIME,
            ..Default::default()
        },
    );
    for (id, app) in [("js-fs", "fs_agent"), ("ts-fs", "fs_agent_ts")] {
        register_component(&c, id, &Lang::Js.build(&c, app), &roomy(fs_task()));
        let run = invoke_json(&c, &[id]);
        assert_eq!(run["ok"], true, "{id}: {run}");
        assert!(
            run["stdout"]
                .as_str()
                .unwrap()
                .contains("the notes say: Thursday"),
            "{id}: {run}"
        );
        assert_eq!(run["trace"][0]["tool"], "read_text_file", "{id}: {run}");
    }
    assert!(c.node.proc.log().contains("tool calls: 1"));

    // A component importing an interface the world lacks never registers.
    let evil = c.modules.join("evil.wasm");
    let bytes =
        wat::parse_str(r#"(component (import "evil:net/socket@1.0.0" (instance)))"#).unwrap();
    std::fs::write(&evil, bytes).unwrap();
    let (code, out, err) = register(&c, "evil", &evil, &fs_task(), &[]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("imports 'evil:net/socket@1.0.0', which the agent world"),
        "{out}{err}"
    );
    let (_, listed, _) = c.sms.client(&["tasks", "list"]);
    assert!(!listed.contains("evil"), "{listed}");
}

#[test]
fn hostile_python_guests_end_at_their_limits_and_the_node_serves_others() {
    hostile_guests_end_at_their_limits(Lang::Python);
}

#[test]
fn hostile_js_guests_end_at_their_limits_and_the_node_serves_others() {
    hostile_guests_end_at_their_limits(Lang::Js);
}

/// Runs each of `lang`'s hostile guests (tests/guests/LANG/hostile.*) in
/// a task of 3 s: each ends within its wall clock (plus 0.1 s) and the
/// node's `/status` answers while one spins.
fn hostile_guests_end_at_their_limits(lang: Lang) {
    let work = tempfile::tempdir().unwrap();
    let hang = calls_guest_tool(work.path(), "never_returns", "{}");
    let c = cluster_opts(
        "the others are served",
        ClusterOptions {
            models: vec![("hang", hang)],
            node_toml: COMPILE_TIME,
            ..Default::default()
        },
    );
    let mut config = fs_task();
    config["limits"] = json!({"wall_ms": 3000, "cpu_ms": 60000});
    config["llm"] = json!({"backend": "hang"});
    let module = lang.build(&c, "hostile");
    register_component(&c, "hostile", &module, &config);
    // The same component under a task with room for its first compile:
    // the node keeps it compiled for the 3 s runs.
    register_component(&c, "warm", &module, &roomy(fs_task()));
    let warmed = invoke_json(&c, &["warm", "--input", "widen"]);
    assert_eq!(warmed["ok"], true, "{warmed}");
    let attempt = |what: &str| invoke_json(&c, &["hostile", "--input", what]);

    // A widening write raises the SDK's Refused with the node's sentence.
    let widened = attempt("widen");
    assert_eq!(widened["ok"], true, "{widened}");
    let said = widened["stdout"].as_str().unwrap();
    assert!(
        said.starts_with("refused (denied): ")
            && said.contains("'elsewhere'")
            && said.contains("mcp.allowed_server_ids"),
        "{widened}"
    );

    // A spinning guest ends at its wall clock, the node answering meanwhile.
    let spinning = std::thread::scope(|s| {
        let spin = s.spawn(|| attempt("spin"));
        eventually(
            "the node's /status while a guest spins",
            Duration::from_secs(20),
            || {
                let status = c.node.status()?;
                (status["guest_runs"]["in_progress"] == 1)
                    .then_some(())
                    .ok_or(status.to_string())
            },
        );
        spin.join().unwrap()
    });
    assert_eq!(spinning["ok"], false, "{spinning}");
    let error = spinning["error"].as_str().unwrap_or_default();
    assert!(error.contains("wall-clock limit of 3s"), "{spinning}");
    assert!(spinning["duration_ms"].as_u64() <= Some(3100), "{spinning}");

    // A guest tool that never returns, deep recursion and a tight loop of
    // host calls end too, within the wall clock; a memory bomb is refused
    // its growth.
    for what in ["tool-spin", "recurse", "host-calls", "bomb"] {
        let run = attempt(what);
        assert_eq!(run["ok"], false, "{lang:?} {what}: {run}");
        assert!(
            run["duration_ms"].as_u64() <= Some(3100),
            "{lang:?} {what}: {run}"
        );
        if what == "bomb" {
            let said = format!("{}{}", run["error"], run["stderr"]);
            assert!(
                said.contains("MemoryError")
                    || said.contains("out of memory")
                    || said.contains("limits.memory_mb"),
                "{lang:?}: {run}"
            );
        }
    }

    // A log flood leaves at most the run's bound in the node's log, and
    // ends by itself or at the wall clock (200,000 lines through
    // SpiderMonkey outlast 3 s on a debug node).
    let flood = attempt("flood");
    let at_wall = flood["error"]
        .as_str()
        .is_some_and(|e| e.contains("wall-clock limit of 3s"));
    assert!(flood["ok"] == true || at_wall, "{flood}");
    assert!(flood["duration_ms"].as_u64() <= Some(3100), "{flood}");
    let log = c.node.proc.log();
    let lines = log.matches("flood line ").count();
    assert!(lines <= 1000, "{lines} flood lines in the node's log");
    assert!(
        log.contains("the rest of this run's are dropped"),
        "{lines}"
    );

    // And the node still serves an honest guest.
    register_component(&c, "fs", &lang.build(&c, "fs_agent"), &roomy(fs_task()));
    let run = invoke_json(&c, &["fs"]);
    assert_eq!(run["ok"], true, "{run}");
    let stdout = run["stdout"].as_str().unwrap();
    assert!(stdout.contains("the others are served"), "{run}");
    assert_eq!(run["trace"][0]["tool"], "read_text_file", "{run}");
    // The guest's log line reached the node's log, under the run.
    assert!(c.node.proc.log().contains("tool calls: 1"));
}
