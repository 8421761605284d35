//! The node's MCP client against our own misbehaving server (tests/peers/), driven through the
//! real `spearlet mcp` command: a crash or a hang mid-call, huge output, an invalid schema,
//! grandchildren left running, and a flood of stderr carrying a secret.

use std::time::Duration;

use spear_tests::mcp_cli::spearlet_mcp;
use spear_tests::peers::misbehaving_server;
use spear_tests::wait::eventually;

fn misbehaving() -> String {
    misbehaving_server().to_string_lossy().into_owned()
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
