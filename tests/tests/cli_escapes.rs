//! Text from peers never commands the operator's terminal (issue 54): a
//! real MCP server (`peers/escaping_server.py`) whose tool name, title,
//! description, result and stderr carry ESC[2J, an OSC title, BEL, a
//! carriage return and U+202E, served by a real node and SMS; every
//! command of `spearlet` and `sms` that shows any of it prints it escaped
//! (`\u{1b}` as text, `\u001b` in JSON, which stays valid JSON), and no
//! such character reaches stdout, stderr or a daemon's log.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::fixtures::{once_cluster, one_server_task, serve, write_file};
use spear_tests::peers::python_sdk;
use spear_tests::procs::bin;
use spear_tests::tasks::{guest, register, repo_file, Cluster};
use spear_tests::wait::eventually;

/// The server's tool, as it names it.
const NAME: &str = "wipe\x1b[2J\x1b]0;owned\x07\u{202e}tool";

/// A character a terminal acts on rather than shows: a control other than
/// newline and tab, or a bidirectional or zero-width format character.
fn obeyed(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` (what `what` printed) holds no character a terminal would obey;
/// with `peer`, it shows the server's text, escaped.
fn assert_shown(what: &str, text: &str, peer: bool) {
    if let Some(c) = text.chars().find(|c| obeyed(*c)) {
        panic!("{what}: {c:?} reached the terminal:\n{text}");
    }
    if peer {
        let text_form =
            text.contains("\\u{1b}[2J\\u{1b}]0;owned\\u{7}") && text.contains("\\u{202e}");
        let json_form =
            text.contains("\\u001b[2J\\u001b]0;owned\\u0007") && text.contains("\\u202e");
        // In a log line tracing-subscriber escaped ESC and BEL itself.
        let log_form = text.contains("\\x1b[2J\\x1b]0;owned\\x07") && text.contains("\\u{202e}");
        assert!(
            text_form || json_form || log_form,
            "{what}: the server's text is not shown:\n{text}"
        );
    }
}

/// Runs `spearlet ARGS` with no `RUST_LOG`: exit code, stdout, stderr.
fn spearlet(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("spearlet"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("spearlet: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether `out` is one JSON document, or one per line.
fn parses(out: &str) -> bool {
    serde_json::from_str::<Value>(out).is_ok()
        || out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
}

/// Checks one command's output: it succeeded, neither stream holds a
/// character a terminal obeys, stdout shows the server's text when
/// `peer`, and parses as JSON when `json`. Returns (stdout, stderr).
fn check(
    what: &str,
    (code, out, err): (i32, String, String),
    peer: bool,
    json: bool,
) -> (String, String) {
    assert_eq!(code, 0, "{what}: {out}{err}");
    assert_shown(&format!("{what} (stdout)"), &out, peer);
    assert_shown(&format!("{what} (stderr)"), &err, false);
    assert!(!json || parses(&out), "{what}: not JSON:\n{out}");
    (out, err)
}

fn server_command(state: &Path) -> Vec<String> {
    vec![
        python_sdk().display().to_string(),
        repo_file("tests/peers/escaping_server.py")
            .display()
            .to_string(),
        state.display().to_string(),
    ]
}

#[test]
fn spearlet_mcp_shows_a_servers_text_escaped() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let command = server_command(dir.path());
    // `spearlet ARGS -- <the server>`, checked.
    let mcp = |args: &[&str], json: bool| {
        let mut all = args.to_vec();
        all.push("--");
        all.extend(command.iter().map(String::as_str));
        node(&all, true, json)
    };
    let (list, _) = mcp(&["mcp", "list-tools"], false);
    assert!(
        list.contains("QUARANTINED: the server lists it twice"),
        "{list}"
    );
    assert_eq!(list.lines().count(), 2, "one row per tool: {list}");
    let (listed, _) = mcp(&["mcp", "list-tools", "--json"], true);
    let listed: Value = serde_json::from_str(&listed).unwrap_or_default();
    assert_eq!(
        listed["tools"][0]["name"], NAME,
        "the JSON says the same: {listed}"
    );
    // -v: the log, with the server's stderr in it.
    let (_, log) = mcp(&["-v", "mcp", "list-tools"], false);
    assert_shown("-v mcp list-tools (its log)", &log, true);
    let (called, _) = mcp(&["mcp", "call", "--tool", NAME], false);
    assert!(called.starts_with("said "), "{called}");
}

/// Runs `sms ARGS` at `c`'s SMS and checks it ([`check`]).
fn sms(c: &Cluster, args: &[&str], peer: bool, json: bool) -> (String, String) {
    check(
        &format!("sms {}", args.join(" ")),
        c.sms.client(args),
        peer,
        json,
    )
}

/// Runs `spearlet ARGS` and checks it ([`check`]).
fn node(args: &[&str], peer: bool, json: bool) -> (String, String) {
    check(
        &format!("spearlet {}", args.join(" ")),
        spearlet(args),
        peer,
        json,
    )
}

/// SMS and node-a with the escaping server behind an approval, its one
/// tool called once by the `once` model's task `escaping`.
fn cluster(dir: &Path) -> Cluster {
    let c = once_cluster(dir, "escaping", NAME);
    let state = dir.join("server-state");
    std::fs::create_dir_all(&state).unwrap_or_else(|e| panic!("{e}"));
    let command = server_command(&state);
    let file = json!({"id": "escaping", "command": command[0], "args": &command[1..],
                      "approval": {"tools": ["*"]}});
    serve(&c, "escaping", &file);
    let task = one_server_task("escaping", "once");
    write_file(c.work.path(), "task.json", &task.to_string());
    let (code, _, err) = register(&c, "escaping", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    c
}

/// `sms invoke` while the call waits: `sms approvals list` and `show`
/// name the tool; approved, the run prints what the server said.
fn invoke_through_an_approval(c: &Cluster) {
    std::thread::scope(|scope| {
        let run = scope.spawn(|| c.sms.client(&["invoke", "escaping"]));
        let id = eventually("a pending approval", Duration::from_secs(30), || {
            let (_, out, _) = c.sms.client(&["approvals", "list", "--json"]);
            let all: Value = serde_json::from_str(&out).unwrap_or_default();
            all.as_array()
                .into_iter()
                .flatten()
                .find(|a| a["state"] == "pending")
                .and_then(|a| a["id"].as_str().map(String::from))
                .ok_or(out)
        });
        sms(c, &["approvals", "list"], true, false);
        sms(c, &["approvals", "list", "--json"], true, true);
        sms(c, &["approvals", "show", &id], true, true);
        sms(c, &["approvals", "approve", &id], false, false);
        let ran = run.join().unwrap_or_else(|_| panic!("sms invoke"));
        let (out, err) = check("sms invoke", ran, true, false);
        // Its stderr named the call it waited for, and the call made.
        assert_shown("sms invoke (stderr)", &err, true);
        assert!(out.contains("the server said: said "), "{out}");
    });
}

#[test]
fn every_command_shows_a_servers_text_escaped() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = cluster(dir.path());
    invoke_through_an_approval(&c);
    // After its call the server changed the tool: the next run's list
    // sees it, the node holds the tool (the call is not made) and tells SMS.
    let (code, out, err) = c.sms.client(&["invoke", "--json", "escaping"]);
    assert!(code == 0 || code == 1, "{out}{err}");
    assert_shown("sms invoke --json", &out, false);
    assert!(parses(&out), "sms invoke --json: not JSON:\n{out}");
    eventually("the drift at SMS", Duration::from_secs(30), || {
        let (_, out, _) = c.sms.client(&["pins", "list", "--json"]);
        out.contains("wipe").then_some(()).ok_or(out)
    });
    // (arguments, shows the server's text, JSON)
    let commands: &[(&[&str], bool, bool)] = &[
        (&["pins", "list"], true, false),
        (&["pins", "list", "--json"], true, true),
        (&["pins", "diff", "escaping"], true, false),
        (&["audit"], true, false),
        (&["audit", "--json"], true, true),
        (&["status"], false, false),
        (&["status", "--json"], false, true),
        (&["servers"], false, false),
        (&["usage"], false, false),
        (&["usage", "--json"], false, true),
        (&["tasks", "list"], false, false),
        (&["audit", "verify"], false, false),
    ];
    for (args, peer, json) in commands {
        sms(&c, args, *peer, *json);
    }
    let state = c.node.state_dir.display().to_string();
    let task = c.work.path().join("task.json").display().to_string();
    node(
        &["explain", "--task", &task, "--state-dir", &state],
        true,
        false,
    );
    node(
        &["explain", "--json", "--task", &task, "--state-dir", &state],
        true,
        true,
    );
    let (held, _) = node(
        &[
            "mcp",
            "list-tools",
            "--server",
            "escaping",
            "--state-dir",
            &state,
        ],
        true,
        false,
    );
    assert!(held.contains("HELD: "), "{held}");
    node(&["registry", "--state-dir", &state], false, false);
    node(&["registry", "--json", "--state-dir", &state], false, true);
    node(&["audit-verify", "--state-dir", &state], false, false);
    // The daemons' logs, which hold the server's stderr and its tool's name.
    assert_shown("the node's log", &c.node.proc.log(), true);
    assert_shown("SMS's log", &c.sms.proc.log(), false);
}
