//! Agents built as WebAssembly components (the world in
//! wit/spear-agent.wit) with the real toolchains, registered with
//! `sms tasks register` and invoked through SMS on a real node against
//! the real filesystem MCP server, the model scripted by `replay-llm`:
//! a Python guest tool is called by the model and its result reaches the
//! answer; a widening write raises the SDK's `Refused` with the node's
//! sentence; hostile Python guests end at their limits, and the Python
//! fs-agent still answers from the file it read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::components::python_agent;
use spear_tests::tasks::{
    cluster_opts, fs_task, invoke_json, register, repo_file, Cluster, ClusterOptions,
};
use spear_tests::wait::eventually;

fn examples() -> PathBuf {
    repo_file("sdk-guest/python/examples")
}

fn hostile() -> PathBuf {
    repo_file("tests/guests/python")
}

/// A Python component is 18 MB of interpreter: its first compile, with
/// the suite's other tests on the same cores, may take minutes (once per
/// node; its compiled form is kept).
const COMPILE_TIME: &str = "[guests]\ncompile_timeout_ms = 600000\n";

/// Builds `app` of `dir` into the cluster's module directory and
/// registers it as task `id` with `config`.
fn register_python(c: &Cluster, id: &str, dir: &Path, app: &str, config: &Value) {
    let module = python_agent(dir, app, &c.modules);
    let (code, out, err) = register(c, id, &module, config, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("component"),
        "register names the kind: {out}{err}"
    );
}

#[test]
fn a_python_guest_tool_is_called_by_the_model_and_its_result_reaches_the_answer() {
    let work = tempfile::tempdir().unwrap();
    let recording = work.path().join("word-count.json");
    let turns = json!({"turns": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "word_count", "arguments": "{\"text\": \"one two three four\"}"}}]},
        {"role": "assistant", "content": "the guest counted: {{last_tool_result}}"},
    ]});
    std::fs::write(&recording, turns.to_string()).unwrap();
    let c = cluster_opts(
        "unused",
        ClusterOptions {
            models: vec![("words", recording)],
            node_toml: COMPILE_TIME,
            ..Default::default()
        },
    );
    let mut config = fs_task();
    config["llm"] = json!({"backend": "words"});
    register_python(&c, "py-tool", &examples(), "tool_agent", &config);
    let run = invoke_json(&c, &["py-tool"]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["stdout"]
            .as_str()
            .unwrap()
            .contains("the guest counted: 4 words"),
        "{run}"
    );
}

#[test]
fn hostile_python_guests_end_at_their_limits_and_the_node_serves_others() {
    let c = cluster_opts(
        "the others are served",
        ClusterOptions {
            node_toml: COMPILE_TIME,
            ..Default::default()
        },
    );
    let mut config = fs_task();
    config["limits"] = json!({"wall_ms": 3000, "cpu_ms": 60000});
    register_python(&c, "py-hostile", &hostile(), "hostile", &config);
    register_python(&c, "py-fs", &examples(), "fs_agent", &fs_task());
    let attempt = |what: &str| invoke_json(&c, &["py-hostile", "--input", what]);
    // The same component under a task with room for its first compile
    // (SMS waits a run's wall clock plus a margin, and the compile comes
    // first): the node keeps it compiled for py-hostile's 3 s runs.
    let mut roomy = fs_task();
    roomy["limits"] = json!({"wall_ms": 600000});
    register_python(&c, "py-warm", &hostile(), "hostile", &roomy);
    let warmed = invoke_json(&c, &["py-warm", "--input", "widen"]);
    assert_eq!(warmed["ok"], true, "{warmed}");

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
    assert!(
        spinning["error"]
            .as_str()
            .unwrap_or_default()
            .contains("wall-clock limit of 3s"),
        "{spinning}"
    );
    assert!(spinning["duration_ms"].as_u64() <= Some(3100), "{spinning}");

    // Deep recursion and a tight loop of host calls end too, within the
    // wall clock; a memory bomb is refused its growth.
    let mut ended = Vec::new();
    for what in ["recurse", "host-calls", "bomb"] {
        let run = attempt(what);
        assert_eq!(run["ok"], false, "{what}: {run}");
        assert!(run["duration_ms"].as_u64() <= Some(3100), "{what}: {run}");
        ended.push(run);
    }
    let bomb = &ended[2];
    let said = format!("{}{}", bomb["error"], bomb["stderr"]);
    assert!(
        said.contains("MemoryError") || said.contains("limits.memory_mb"),
        "{bomb}"
    );

    // A log flood leaves at most the run's bound in the node's log.
    let flood = attempt("flood");
    assert_eq!(flood["ok"], true, "{flood}");
    let log = c.node.proc.log();
    let lines = log.matches("flood line ").count();
    assert!(lines <= 1000, "{lines} flood lines in the node's log");
    assert!(
        log.contains("the rest of this run's are dropped"),
        "{lines}"
    );

    // And the node still serves an honest guest.
    let run = invoke_json(&c, &["py-fs"]);
    assert_eq!(run["ok"], true, "{run}");
    let stdout = run["stdout"].as_str().unwrap();
    assert!(stdout.contains("the others are served"), "{run}");
    assert_eq!(run["trace"][0]["tool"], "read_text_file", "{run}");
    // The guest's log line reached the node's log, under the run.
    assert!(c.node.proc.log().contains("tool calls: 1"));
}
