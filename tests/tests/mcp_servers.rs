//! The node's MCP client against real servers: the npm reference servers
//! (`server-everything`, `server-filesystem`) and our own misbehaving one,
//! driven through the real `spearlet mcp` command.

use std::process::Command;
use std::time::Duration;

use spear_tests::fixtures::write_file;
use spear_tests::peers::{misbehaving_server, npm_bin};
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `spearlet mcp <args>` with `env` added to a clean environment.
fn spearlet_mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin("spearlet"));
    cmd.arg("mcp").args(args).env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run spearlet mcp: {e}"));
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn everything() -> String {
    npm_bin("mcp-server-everything")
        .to_string_lossy()
        .into_owned()
}

fn misbehaving() -> String {
    misbehaving_server().to_string_lossy().into_owned()
}

#[test]
fn server_everything_over_stdio_lists_calls_and_reports_errors() {
    let e = everything();
    let list = spearlet_mcp(&["list-tools", "--", &e, "stdio"], &[]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    for tool in ["echo", "get-sum", "get-env"] {
        assert!(
            list.stdout.lines().any(|l| l.starts_with(tool)),
            "{tool} missing:\n{}",
            list.stdout
        );
    }
    let echo = spearlet_mcp(
        &[
            "call",
            "--tool",
            "echo",
            "--args",
            r#"{"message": "hello spear"}"#,
            "--",
            &e,
            "stdio",
        ],
        &[],
    );
    assert_eq!(
        (echo.code, echo.stdout.trim()),
        (0, "Echo: hello spear"),
        "{}",
        echo.stderr
    );
    let sum = spearlet_mcp(
        &[
            "call",
            "--tool",
            "get-sum",
            "--args",
            r#"{"a": 2, "b": 40}"#,
            "--",
            &e,
            "stdio",
        ],
        &[],
    );
    assert!(sum.stdout.contains("42"), "{}", sum.stdout);
    let bad = spearlet_mcp(
        &[
            "call",
            "--tool",
            "get-sum",
            "--args",
            r#"{"a": "two"}"#,
            "--",
            &e,
            "stdio",
        ],
        &[],
    );
    assert_eq!(bad.code, 1);
    assert!(bad.stdout.contains("expected number"), "{}", bad.stdout);
    let structured = spearlet_mcp(
        &[
            "call",
            "--tool",
            "get-structured-content",
            "--args",
            r#"{"location": "New York"}"#,
            "--",
            &e,
            "stdio",
        ],
        &[],
    );
    assert!(
        structured.stdout.contains("temperature"),
        "{}",
        structured.stdout
    );
}

#[test]
fn server_filesystem_reads_inside_its_root_and_refuses_outside() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "spear notes: 7 tools").unwrap();
    let fs = npm_bin("mcp-server-filesystem")
        .to_string_lossy()
        .into_owned();
    let root_path = root
        .path()
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let list = spearlet_mcp(&["list-tools", "--", &fs, &root_path], &[]);
    assert!(
        list.stdout.contains("read_text_file") && list.stdout.contains("list_directory"),
        "{}",
        list.stdout
    );
    let file = format!("{root_path}/notes.txt");
    let read = spearlet_mcp(
        &[
            "call",
            "--tool",
            "read_text_file",
            "--args",
            &format!(r#"{{"path": "{file}"}}"#),
            "--",
            &fs,
            &root_path,
        ],
        &[],
    );
    assert_eq!(read.code, 0, "{} {}", read.stdout, read.stderr);
    assert!(
        read.stdout.contains("spear notes: 7 tools"),
        "{}",
        read.stdout
    );
    let outside = spearlet_mcp(
        &[
            "call",
            "--tool",
            "read_text_file",
            "--args",
            r#"{"path": "/etc/hostname"}"#,
            "--",
            &fs,
            &root_path,
        ],
        &[],
    );
    assert_eq!(outside.code, 1, "{}", outside.stdout);
    assert!(
        outside.stdout.to_lowercase().contains("denied") || outside.stdout.contains("outside"),
        "{}",
        outside.stdout
    );
}

#[test]
fn a_registered_server_gets_node_side_references_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let spec = serde_json::json!({
        "id": "everything",
        "command": everything(),
        "args": ["stdio"],
        "env": {"DECLARED": "${NODE_SIDE}"},
    });
    write_file(dir.path(), "everything.json", &spec.to_string());
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node_dir = state.path().join("n1");
    let node = SpearletProc::start("n1", &sms.grpc, &node_dir);
    eventually(
        "the node to persist the server",
        Duration::from_secs(10),
        || match node.persisted_servers() {
            ids if ids == ["everything"] => Ok(()),
            ids => Err(format!("{ids:?}")),
        },
    );
    let state_dir = node_dir.to_string_lossy().into_owned();
    let env = spearlet_mcp(
        &[
            "call",
            "--server",
            "everything",
            "--state-dir",
            &state_dir,
            "--tool",
            "get-env",
        ],
        &[
            ("NODE_SIDE", "resolved-on-the-node"),
            ("OPENAI_API_KEY", "sk-node-only-secret"),
        ],
    );
    assert_eq!(env.code, 0, "{} {}", env.stdout, env.stderr);
    assert!(
        env.stdout.contains("resolved-on-the-node"),
        "{}",
        env.stdout
    );
    assert!(
        !env.stdout.contains("OPENAI_API_KEY") && !env.stdout.contains("sk-node-only-secret"),
        "{}",
        env.stdout
    );

    let unset = spearlet_mcp(
        &[
            "call",
            "--server",
            "everything",
            "--state-dir",
            &state_dir,
            "--tool",
            "get-env",
        ],
        &[],
    );
    assert_eq!(unset.code, 1);
    assert!(
        unset.stderr.contains("NODE_SIDE") && unset.stderr.contains("env.DECLARED"),
        "{}",
        unset.stderr
    );
}

#[test]
fn a_crash_mid_call_fails_fast_not_at_the_timeout() {
    let m = misbehaving();
    let out = spearlet_mcp(
        &[
            "call",
            "--tool",
            "crash",
            "--timeout-ms",
            "60000",
            "--",
            "python3",
            &m,
        ],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("connection is closed"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("timed out"), "{}", out.stderr);
}

#[test]
fn a_hung_call_times_out_and_the_server_is_told_to_cancel() {
    let m = misbehaving();
    let log = tempfile::tempdir().unwrap();
    let log_file = log.path().join("notifications.log");
    let env_arg = format!("MISBEHAVING_LOG={}", log_file.display());
    let out = spearlet_mcp(
        &[
            "call",
            "--tool",
            "hang",
            "--timeout-ms",
            "300",
            "--env",
            &env_arg,
            "--",
            "python3",
            &m,
            // The server ignores it; naming the log's directory grants it
            // the directory in its sandbox, so it can record what it got.
            &log.path().display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("timed out after 300ms"),
        "{}",
        out.stderr
    );
    let seen = std::fs::read_to_string(&log_file).unwrap_or_default();
    assert!(seen.contains("notifications/cancelled"), "{seen}");
}

#[test]
fn huge_output_is_capped_with_a_marker() {
    let m = misbehaving();
    let out = spearlet_mcp(
        &[
            "call",
            "--tool",
            "huge",
            "--args",
            r#"{"bytes": 3000000}"#,
            "--max-output-bytes",
            "4096",
            "--",
            "python3",
            &m,
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.len() <= 4096 + 1, "{} bytes", out.stdout.len());
    assert!(
        out.stdout.contains("[output truncated:") && out.stdout.contains("of 3000000 bytes shown]")
    );
}

#[test]
fn a_tool_with_an_invalid_schema_is_quarantined_alone() {
    let out = spearlet_mcp(&["list-tools", "--", "python3", &misbehaving()], &[]);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("bad_schema") && l.contains("QUARANTINED")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("ok ") && !l.contains("QUARANTINED")),
        "{}",
        out.stdout
    );
}

/// Host pids of running (not zombie) `sleep 300` processes: what the
/// `spawn` tool starts.
fn sleepers() -> std::collections::BTreeSet<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Default::default();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let running = stat.split_whitespace().nth(2) != Some("Z");
            (cmdline == b"sleep\0300\0" && running).then_some(pid)
        })
        .collect()
}

#[test]
fn grandchildren_do_not_outlive_their_server() {
    // Unconfined the node ends the server's process group; confined (the
    // default) the server's PID namespace ends with it. Either way no
    // `sleep 300` the server started is left once the command is done.
    for sandbox in [&["--no-sandbox"][..], &[]] {
        let before = sleepers();
        let m = misbehaving();
        let mut args = vec!["call", "--tool", "spawn"];
        args.extend_from_slice(sandbox);
        args.extend(["--", "python3", &m]);
        let out = spearlet_mcp(&args, &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let pid: u32 = out
            .stdout
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no pid in {:?}", out.stdout));
        eventually("the grandchild to be gone", Duration::from_secs(5), || {
            let left: Vec<u32> = sleepers().difference(&before).copied().collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "grandchild {pid} ({sandbox:?}) still runs as {left:?}"
                ))
            }
        });
    }
}

#[test]
fn server_stderr_is_bounded_and_secrets_are_redacted() {
    let secret = "sk-stderr-secret-991";
    let out = spearlet_mcp(
        &[
            "call",
            "--tool",
            "stderr",
            "--args",
            r#"{"lines": 5000}"#,
            "--env",
            "TOKEN=${SPEAR_TEST_TOKEN}",
            "--",
            "python3",
            &misbehaving(),
        ],
        &[("SPEAR_TEST_TOKEN", secret)],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains(secret), "a secret reached the log");
    let logged = out
        .stderr
        .lines()
        .filter(|l| l.contains("stderr: line"))
        .count();
    assert!(logged > 0 && logged <= 200, "{logged} stderr lines logged");
    assert!(out.stderr.contains("token=<redacted>"));
}

/// server-memory as people write it (`npx -y` of an exact version, no
/// `MEMORY_FILE_PATH`): installed apart into this server's own copy, run
/// confined, and its memory, kept beside its code, lasts to the next start.
#[test]
fn server_memory_keeps_its_graph_confined() {
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().display().to_string();
    let env = [("SPEAR_PACKAGE_CACHE", cache_dir.as_str())];
    let npx = [
        "--",
        "npx",
        "-y",
        "@modelcontextprotocol/server-memory@2026.8.31",
    ];
    let entities = r#"{"entities": [{"name": "spear", "entityType": "project", "observations": ["sandboxed"]}]}"#;
    let mut create = vec!["call", "--tool", "create_entities", "--args", entities];
    create.extend(npx);
    let out = spearlet_mcp(&create, &env);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("sandbox: confined"), "{}", out.stderr);
    let mut read = vec!["call", "--tool", "read_graph"];
    read.extend(npx);
    let out = spearlet_mcp(&read, &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("\"observations\":[\"sandboxed\"]"),
        "{}",
        out.stdout
    );
}

/// A PyPI server as a registry file makes it (`uvx NAME==VERSION`): the
/// node installs it apart (wheels only, into this server's own
/// environment), runs it confined without uvx or any network, and a second
/// start uses the copy: with the package index made unreachable it still
/// starts.
#[test]
fn a_pypi_server_is_installed_apart_and_runs_confined() {
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().display().to_string();
    let call = [
        "call",
        "--tool",
        "get_current_time",
        "--args",
        r#"{"timezone": "Europe/Paris"}"#,
        "--",
        "uvx",
        "mcp-server-time==2026.10.19",
    ];
    let out = spearlet_mcp(&call, &[("SPEAR_PACKAGE_CACHE", cache_dir.as_str())]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("sandbox: confined"), "{}", out.stderr);
    assert!(
        out.stdout.contains("\"timezone\":\"Europe/Paris\""),
        "{}",
        out.stdout
    );
    let copy = cache.path().join("adhoc/mcp-server-time__2026.10.19");
    assert!(
        copy.join("pyvenv.cfg").is_file(),
        "no environment at {copy:?}"
    );

    let offline = [
        ("SPEAR_PACKAGE_CACHE", cache_dir.as_str()),
        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple"),
    ];
    let out = spearlet_mcp(&call, &offline);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("\"day_of_week\""), "{}", out.stdout);
}
