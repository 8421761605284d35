//! The northbound endpoint on a machine of its own: `spearlet mcp serve`
//! serves a directory's virtual server to the real Python and TypeScript
//! MCP SDKs, 1.x (2025-11-25, a session) and 2.x (2026-07-28, stateless,
//! found through `server/discover`), over the real filesystem MCP server
//! started in its sandbox. Each client lists exactly
//! what the virtual server offers (its patterns, its alias, never a tool
//! the server's own deny list refuses); a call reads a real file; a
//! denied tool, an alias's upstream name and a made-up name are refused
//! with the same error, and the denied write never reaches the disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::{node22, npm_bin, npm_dir, peer_file, python_sdk, python_sdk2, LinePeer};
use spear_tests::procs::{bin, output_within};

const NOTES: &str = "the northbound read: Thursday";

/// `fs` (the filesystem server over `root`, `write_file` denied by its own
/// file) and virtual server `research` offering three of its tools.
fn mcp_dir(dir: &Path, root: &Path) {
    let fs = json!({
        "id": "fs",
        "command": npm_bin("mcp-server-filesystem"),
        "args": [root],
        "denied_tools": ["write_file"],
    });
    std::fs::write(dir.join("fs.json"), fs.to_string()).unwrap();
    let research = json!({
        "virtual_server": "research",
        "description": "Reading the notes",
        "offers": [{
            "server": "fs",
            "tools": ["read_text_file", "list_directory", "write_file"],
            "aliases": {"list_directory": "ls"},
        }],
    });
    std::fs::write(dir.join("research.json"), research.to_string()).unwrap();
}

/// The four clients: how to run each, and the generation it must speak.
fn clients() -> Vec<(&'static str, Command, &'static str)> {
    let npm = npm_dir();
    let ts = |sdk: PathBuf, generation: &str| {
        let mut command = Command::new(node22());
        command
            .arg(peer_file("northbound_client.mjs"))
            .arg(sdk)
            .arg(generation);
        command
    };
    let py = |python: PathBuf| {
        let mut command = Command::new(python);
        command.arg(peer_file("northbound_client.py"));
        command
    };
    vec![
        ("Python SDK 1.x", py(python_sdk()), "2025-11-25"),
        ("Python SDK 2.x", py(python_sdk2()), "2026-07-28"),
        ("TypeScript SDK 1.x", ts(npm.clone(), "1"), "2025-11-25"),
        (
            "TypeScript SDK 2.x",
            ts(npm.join("ts-client2"), "2"),
            "2026-07-28",
        ),
    ]
}

/// What `client` reports after making `calls` against `url`.
fn report(name: &str, mut client: Command, url: &str, calls: &Value) -> Value {
    client.arg(url).arg(calls.to_string());
    let output = output_within(client, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{name} failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{name} printed no JSON ({e}): {stdout}"))
}

#[test]
fn python_and_typescript_clients_of_both_generations_get_exactly_the_virtual_servers_tools() {
    let files = tempfile::tempdir().unwrap();
    let root = files.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), NOTES).unwrap();
    let dir = tempfile::tempdir().unwrap();
    mcp_dir(dir.path(), &root);
    let mut serve = Command::new(bin("spearlet"));
    serve
        .args(["mcp", "serve", "--listen", "127.0.0.1:0", "--mcp-dir"])
        .arg(dir.path());
    let server = LinePeer::start(serve);
    let url = format!("http://{}", server.wait_for("http://"));
    assert!(url.ends_with("/v/research/mcp"), "{url}");

    let notes = root.join("notes.txt");
    let calls = json!([
        {"tool": "fs__read_text_file", "args": {"path": notes}},
        {"tool": "ls", "args": {"path": root}},
        {"tool": "fs__write_file", "args": {"path": notes, "content": "overwritten"}},
        {"tool": "fs__list_directory", "args": {"path": root}},
        {"tool": "fs__made_up", "args": {}},
    ]);
    for (name, client, protocol) in clients() {
        let report = report(name, client, &url, &calls);
        assert_eq!(report["protocol"], protocol, "{name}: {report}");
        assert_eq!(
            report["tools"],
            json!(["fs__read_text_file", "ls"]),
            "{name}: {report}"
        );
        let calls = report["calls"].as_array().unwrap();
        assert_eq!(calls[0]["text"], NOTES, "{name}: {report}");
        assert_eq!(calls[0]["is_error"], false, "{name}: {report}");
        assert!(
            calls[1]["text"].as_str().unwrap().contains("notes.txt"),
            "{name}: {report}"
        );
        // Denied by the server's own file, the upstream name of an aliased
        // tool, a name nobody has: one answer, naming only what was sent.
        let refusal = |i: usize| calls[i]["error"].as_str().unwrap_or_default().to_string();
        assert!(
            refusal(4).contains("Unknown tool: fs__made_up"),
            "{name}: {report}"
        );
        for (i, name) in [(2, "fs__write_file"), (3, "fs__list_directory")] {
            assert_eq!(
                refusal(i).replace(name, "NAME"),
                refusal(4).replace("fs__made_up", "NAME"),
                "{name}: {report}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        NOTES,
        "the write never ran"
    );
}

#[test]
fn the_endpoint_listens_on_loopback_only_and_names_a_missing_virtual_server() {
    let files = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    mcp_dir(dir.path(), files.path());
    let run = |args: &[&str]| {
        let mut command = Command::new(bin("spearlet"));
        command
            .args(["mcp", "serve", "--mcp-dir"])
            .arg(dir.path())
            .args(args);
        let output = output_within(command, Duration::from_secs(60));
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, said) = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("0.0.0.0:0 is not a loopback address"),
        "{said}"
    );
    let (code, said) = run(&["--listen", "127.0.0.1:0", "--virtual-server", "nope"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("declares no virtual server 'nope'"), "{said}");
}

/// A client that floods the endpoint with what it may not do (calls of
/// tools it is not offered, requests a web page makes through DNS
/// rebinding) is refused each time, and the node's log does not grow with
/// it: the refusals are the client's answers, not the operator's reading.
#[test]
fn a_flood_of_refused_requests_is_answered_without_flooding_the_log() {
    const N: usize = 400;
    let files = tempfile::tempdir().unwrap();
    let root = files.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), NOTES).unwrap();
    let dir = tempfile::tempdir().unwrap();
    mcp_dir(dir.path(), &root);
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut serve = Command::new(bin("spearlet"));
    serve
        .args(["mcp", "serve", "--listen", "127.0.0.1:0", "--mcp-dir"])
        .arg(dir.path())
        .env_remove("RUST_LOG")
        .stderr(log.reopen().unwrap());
    let server = LinePeer::start(serve);
    let url = format!("http://{}", server.wait_for("http://"));

    let mut flood = Command::new(python_sdk());
    flood
        .arg(peer_file("northbound_flood.py"))
        .arg(&url)
        .arg(N.to_string())
        .arg(&root);
    let output = output_within(flood, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["refused"], N, "{report}");
    assert_eq!(report["rebound"], N, "{report}");
    assert!(
        report["text"]
            .as_str()
            .unwrap_or_default()
            .contains("notes.txt"),
        "{report}"
    );
    drop(server);
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        logged.lines().count() < 20,
        "{} log lines for {N} refused calls and {N} rebinding requests:\n{}",
        logged.lines().count(),
        spear_common::text::prefix(&logged, 4000)
    );
}
