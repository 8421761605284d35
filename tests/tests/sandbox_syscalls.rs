//! The system calls the sandbox refuses (issue 54): a stdio server started
//! by a real node, and by `spearlet mcp call`, tries io_uring (whose
//! operations seccomp never sees), a vsock or AF_ALG socket, a personality
//! that turns off address randomisation, and calls on other processes;
//! each answers `EPERM`, while the calls runtimes make still work.

use serde_json::{json, Value};
use spear_tests::fixtures::{once_cluster, one_server_task, serve};
use spear_tests::peers::{python_sdk, spearlet_mcp};
use spear_tests::tasks::{guest, register, repo_file};

/// The calls refused, each answered `EPERM` by the filter.
const REFUSED: &[&str] = &[
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "personality ADDR_NO_RANDOMIZE",
    "socket AF_VSOCK",
    "socket AF_ALG",
    "kcmp",
    "pidfd_getfd",
    "uselib",
];

/// What the server's `syscalls` tool answered, checked.
fn assert_refused(report: &Value, context: &str) {
    for call in REFUSED {
        assert_eq!(report[call], "EPERM", "{call}: {context}");
    }
    // What runtimes make still works: the filter refuses only its list.
    for call in ["personality query", "socket AF_UNIX", "getpid"] {
        let got = report[call].as_str().unwrap_or_default();
        assert!(got.starts_with("ok"), "{call}: {got}: {context}");
    }
    // The query shows the refused flag was never set.
    assert_eq!(report["personality query"], "ok 0", "{context}");
}

fn server() -> (String, String) {
    (
        python_sdk().display().to_string(),
        repo_file("tests/peers/syscall_server.py")
            .display()
            .to_string(),
    )
}

#[test]
fn a_server_on_a_node_is_refused_io_uring_and_the_calls_docker_refuses() {
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = once_cluster(work.path(), "syscalls", "syscalls");
    let (python, script) = server();
    let file = json!({"id": "syscalls", "command": python, "args": [script], "pin": "off"});
    serve(&c, "syscalls", &file);
    let task = one_server_task("syscalls", "once");
    let (code, _, err) = register(&c, "syscalls", &guest("task-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, run, err) = c.sms.client(&["invoke", "syscalls"]);
    assert_eq!(code, 0, "{run}{err}");
    let line = run
        .lines()
        .find_map(|l| l.strip_prefix("the server said: "))
        .unwrap_or_else(|| panic!("no report in the run: {run}{err}"));
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {run}"));
    assert_refused(&report, &run);
    // The node's log says the server was confined with seccomp.
    let log = c.node.proc.log();
    assert!(
        log.lines()
            .any(|l| l.contains("sandbox: confined:") && l.contains("seccomp")),
        "no seccomp in the node's sandbox line"
    );
}

#[test]
fn a_server_started_by_spearlet_mcp_is_refused_the_same_calls() {
    let (python, script) = server();
    let (code, out, err) = spearlet_mcp(
        &["call", "--tool", "syscalls", "--", &python, &script],
        &[],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    // The tool's text, then its structured result.
    let text = out.lines().next().unwrap_or_default();
    let report: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_refused(&report, &out);
}
