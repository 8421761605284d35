//! The node's MCP client against real servers: the npm reference servers
//! (`server-everything`, `server-filesystem`, `server-memory`) and a PyPI
//! one, driven through the real `spearlet mcp` command. Our own misbehaving
//! server is in mcp_servers_misbehaving.rs.

use std::time::Duration;

use spear_tests::fixtures::write_file;
use spear_tests::mcp_cli::spearlet_mcp;
use spear_tests::peers::npm_bin;
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

fn everything() -> String {
    npm_bin("mcp-server-everything")
        .to_string_lossy()
        .into_owned()
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
