//! What an operator's command prints (issue 26): `spearlet mcp` answers
//! on stdout, says nothing else on stderr at the default level (its one
//! protocol line aside), says a failure in one sentence, takes `-v` for
//! the log, and never writes colour codes to a file or a pipe.

use std::process::Command;

use spear_tests::peers::npm_bin;
use spear_tests::procs::bin;

/// `spearlet ARGS` with no `RUST_LOG`: exit code, stdout, stderr.
fn spearlet(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("spearlet"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mcp_commands_answer_without_log_lines_unless_asked() {
    let everything = npm_bin("mcp-server-everything").display().to_string();
    let (code, out, err) = spearlet(&["mcp", "list-tools", "--", &everything]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("get-sum"), "{out}");
    assert!(
        !err.contains("INFO") && !err.contains("peer_info") && !err.contains('\x1b'),
        "{err}"
    );

    // A failed call: one sentence, naming what is there.
    let (code, _, err) = spearlet(&["mcp", "call", "--tool", "nope", "--", &everything]);
    assert_ne!(code, 0);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("has no tool of that name") && err.contains("get-sum"),
        "{err}"
    );
    assert!(!err.contains("ERROR") && !err.contains("WARN"), "{err}");

    // -v asks for the log, still without colour in a pipe.
    let (code, _, err) = spearlet(&["-v", "mcp", "list-tools", "--", &everything]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(" INFO "), "{err}");
    assert!(!err.contains('\x1b'), "{err}");
}

/// A daemon logging to a file (as under systemd or in a pod) writes plain
/// lines, without colour codes.
#[test]
fn daemons_write_no_colour_codes_to_a_file() {
    let sms = spear_tests::procs::SmsProc::start(Default::default());
    let log = sms.proc.log();
    assert!(log.contains(" INFO "), "{log}");
    assert!(!log.contains('\x1b'), "{log}");
}

/// A refused setting is said once, not once more as its own cause.
#[test]
fn a_policy_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.toml");
    std::fs::write(&config, "[policy]\nmodules = [\"file:///proc/\"]\n").unwrap();
    let state = dir.path().join("state").display().to_string();
    let config = config.display().to_string();
    let (code, _, err) = spearlet(&[
        "run",
        "--sms",
        "127.0.0.1:1",
        "--state-dir",
        &state,
        "--config",
        &config,
        "--metrics-listen",
        "off",
    ]);
    assert_ne!(code, 0);
    assert_eq!(
        err.matches("name a directory of modules").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("policy.modules: file:///proc/ overlaps"),
        "{err}"
    );
}

/// `sms validate DIR | head -0`: the reader is gone before the command
/// prints. The command ends as a Unix tool does (141, 128 + SIGPIPE), with
/// no panic on stderr.
#[test]
fn a_reader_that_went_away_ends_the_command_quietly() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mcp.d");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(bin("sms"))
        .arg("validate")
        .arg(&examples)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(spear_common::process::CLOSED_PIPE_EXIT),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `sms status` pointed at SMS's metrics port (plain HTTP) says the port
/// is wrong and which one to use, not that a certificate might be.
#[test]
fn a_cli_pointed_at_the_metrics_port_is_told_the_port() {
    let sms = spear_tests::procs::SmsProc::start(Default::default());
    let out = Command::new(bin("sms"))
        .args(["status", "--addr", &sms.metrics])
        .env_remove("SMS_ADMIN_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("answered plain HTTP, not gRPC")
            && stderr.contains("point --addr at SMS's gRPC port (7300 by default)"),
        "{stderr}"
    );
    assert!(!stderr.contains("--tls-ca"), "{stderr}");
}
