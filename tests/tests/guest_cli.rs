//! The agent author's loop and the C SDK, on the real binaries and the
//! real toolchains: `spearlet guest build` builds the C agents (clang for
//! wasm32-wasi with sdk-guest/c/spear.h), which register with `sms tasks
//! register` as core modules and answer through SMS on a real node from a
//! file the real filesystem MCP server read; a C guest tool is called by
//! the model; a C guest's widening write is refused with the node's
//! errno and sentence; `spearlet guest run` runs a module once against
//! `--mcp-dir` and a recorded replay, printing the answer, the tool calls
//! and how it ended; a build without its toolchain says what to install;
//! and spear.h's JSON parts pass their own test natively, sanitized.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use spear_tests::components::calls_guest_tool;
use spear_tests::procs::{bin, output_within};
use spear_tests::tasks::{cluster_opts, fs_task, invoke_json, register, repo_file, ClusterOptions};

/// `spearlet guest build SOURCE -o OUT`: what it printed.
fn guest_build(source: &Path, out: &Path) -> String {
    let mut command = Command::new(bin("spearlet"));
    command
        .args(["guest", "build"])
        .arg(source)
        .arg("-o")
        .arg(out);
    let output = output_within(command, Duration::from_secs(300));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "guest build {}: {said}",
        source.display()
    );
    said
}

fn c_example(name: &str) -> PathBuf {
    repo_file(&format!("sdk-guest/c/examples/{name}.c"))
}

#[test]
fn c_agents_built_by_guest_build_answer_through_sms_on_a_real_node() {
    let work = tempfile::tempdir().unwrap();
    let recording = calls_guest_tool(
        work.path(),
        "word_count",
        r#"{"text": "one two three four"}"#,
    );
    let c = cluster_opts(
        "the C agent read: Thursday",
        ClusterOptions {
            models: vec![("words", recording)],
            ..Default::default()
        },
    );
    let fs = c.modules.join("fs-c.wasm");
    let said = guest_build(&c_example("fs_agent"), &fs);
    assert!(said.contains("(C, "), "{said}");
    let (code, out, err) = register(&c, "fs-c", &fs, &fs_task(), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("(core module)"),
        "{out}{err}"
    );
    let run = invoke_json(&c, &["fs-c"]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["stdout"]
            .as_str()
            .unwrap()
            .contains("the C agent read: Thursday"),
        "{run}"
    );
    assert_eq!(run["trace"][0]["tool"], "read_text_file", "{run}");
    assert_eq!(run["stderr"], "tool calls: 1\n", "{run}");

    // A guest tool written in C, called by the model.
    let tool = c.modules.join("tool-c.wasm");
    guest_build(&c_example("tool_agent"), &tool);
    let mut config = fs_task();
    config["llm"] = json!({"backend": "words"});
    let (code, out, err) = register(&c, "tool-c", &tool, &config, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let run = invoke_json(&c, &["tool-c"]);
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["stdout"]
            .as_str()
            .unwrap()
            .contains("the guest counted: 4 words"),
        "{run}"
    );

    // A widening write: the node's errno and sentence, nothing widened.
    let widen = c.modules.join("widen-c.wasm");
    guest_build(&repo_file("tests/guests/c/widen.c"), &widen);
    let (code, out, err) = register(&c, "widen-c", &widen, &fs_task(), &[]);
    assert_eq!(code, 0, "{out}{err}");
    let run = invoke_json(&c, &["widen-c"]);
    let said = run["stdout"].as_str().unwrap();
    assert!(
        said.starts_with("refused (EACCES): ")
            && said.contains("'elsewhere'")
            && said.contains("mcp.allowed_server_ids"),
        "{run}"
    );
}

#[test]
fn guest_run_runs_a_module_once_against_an_mcp_dir_and_a_replay() {
    let work = tempfile::tempdir().unwrap();
    let files = work.path().join("files");
    let mcp = work.path().join("mcp.d");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::create_dir_all(&mcp).unwrap();
    std::fs::write(files.join("notes.txt"), "guest run read this").unwrap();
    let server = json!({"mcpServers": {"fs": {
        "command": spear_tests::peers::npm_bin("mcp-server-filesystem"), "args": [files],
        "allowed_tools": ["read_*", "list_*"],
    }}});
    std::fs::write(mcp.join("fs.json"), server.to_string()).unwrap();
    let module = work.path().join("fs.wasm");
    guest_build(&c_example("fs_agent"), &module);

    let guest_run = |extra: &[&str]| {
        let mut command = Command::new(bin("spearlet"));
        command
            .args(["guest", "run"])
            .arg(&module)
            .arg("--mcp-dir")
            .arg(&mcp)
            .arg("--replay")
            .arg(repo_file("examples/replay/fs-agent.json"))
            .args(extra)
            .env("SPEAR_DEMO_FILES", &files)
            .env_remove("OPENAI_BASE_URL");
        let output = output_within(command, Duration::from_secs(120));
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = guest_run(&["--input", "What do the notes say?"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("notes.txt says: guest run read this"),
        "{out}{err}"
    );
    assert!(err.contains("tool call: fs/read_text_file (ok)"), "{err}");
    assert!(err.contains("run ended: exited 0"), "{err}");

    // The task's policy holds: under a task without the server, the
    // agent's narrowing to it is a widening, refused with the sentence.
    let narrow = work.path().join("task.json");
    std::fs::write(
        &narrow,
        json!({"mcp": {"enabled": true, "allowed_server_ids": []}}).to_string(),
    )
    .unwrap();
    let (_, out, err) = guest_run(&["--task-config", narrow.to_str().unwrap(), "--json"]);
    let answer: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(answer["exit_code"], 1, "{answer}");
    let stderr = answer["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("fs-agent failed: ") && stderr.contains("mcp.allowed_server_ids"),
        "{answer}"
    );
    assert_eq!(answer["trace"], json!([]), "{answer}");

    // Without a model, one sentence saying how to give one.
    let mut command = Command::new(bin("spearlet"));
    command
        .args(["guest", "run"])
        .arg(&module)
        .arg("--mcp-dir")
        .arg(&mcp)
        .env_remove("OPENAI_BASE_URL");
    let output = output_within(command, Duration::from_secs(30));
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("no model: set OPENAI_BASE_URL"), "{said}");
}

#[test]
fn guest_build_without_its_toolchain_says_what_to_install() {
    let work = tempfile::tempdir().unwrap();
    let mut command = Command::new(bin("spearlet"));
    command
        .args(["guest", "build"])
        .arg(repo_file("sdk-guest/python/examples/fs_agent.py"))
        .arg("-o")
        .arg(work.path().join("out.wasm"))
        .env("SPEAR_TOOLCHAINS", work.path())
        .env_remove("SPEAR_VENV_GUEST");
    let output = output_within(command, Duration::from_secs(30));
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("componentize-py is not installed") && said.contains("scripts/setup.sh"),
        "{said}"
    );
    assert!(!work.path().join("out.wasm").exists());

    let mut command = Command::new(bin("spearlet"));
    command
        .args(["guest", "build", "notes.txt", "-o"])
        .arg(work.path().join("out.wasm"))
        .current_dir(work.path());
    std::fs::write(work.path().join("notes.txt"), "").unwrap();
    let output = output_within(command, Duration::from_secs(30));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("cannot tell its language"), "{said}");
}

#[test]
fn spear_h_json_passes_its_own_test_natively_under_the_sanitizers() {
    let work = tempfile::tempdir().unwrap();
    let test = work.path().join("json_test");
    let mut command = Command::new("clang");
    command
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"])
        .args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all"])
        .arg("-I")
        .arg(repo_file("sdk-guest/c"))
        .arg(repo_file("sdk-guest/c/test/json_test.c"))
        .arg("-o")
        .arg(&test);
    let built = output_within(command, Duration::from_secs(120));
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = output_within(Command::new(&test), Duration::from_secs(120));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(ran.status.success(), "{said}");
    assert!(said.contains(" 0 failed"), "{said}");
}
