//! The MCP conformance suite's server scenarios (`conformance server`,
//! the spec's own tests) against a virtual server: tests/conformance/
//! server.sh serves Spear's fixtures (tests/conformance/fixture_server.py
//! and fixture_server_2026.py, stdio servers in their sandboxes) behind
//! virtual server `conf` through
//! `spearlet mcp serve`, so every scenario goes through the node's relay:
//! tools, resources, templates, subscriptions, prompts, completion, the
//! log level, and what the fixture sends mid-call (log lines, progress,
//! sampling and elicitation requests), back to the suite's client.
//!
//! Every scored scenario of the newest stable release (0.1.16, `--suite
//! active`) and of the pre-release for both generations (`--requirements
//! 2025-11-25` and `2026-07-28`), from an empty baseline: the second
//! fixture (fixture_server_2026.py) asks for input the 2026-07-28 way, so
//! the relay of `input_required` rounds, their sealed request states and
//! the client's own capabilities is scored too. Then a change of the
//! upstream's tools reaches a 2025-11-25 session as
//! `notifications/tools/list_changed`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use spear_tests::peers::{conformance_suite, peer_file, python_sdk, Release};
use spear_tests::procs::bin;

/// server.sh, stopped as a user stops it (SIGTERM), which stops the node.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start() -> Served {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/server.sh");
        let mut child = Command::new(script)
            .env("SPEARLET_BIN", bin("spearlet"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start server.sh: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (first, line) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            let _ = first.send(lines.next());
            lines.for_each(drop);
        });
        let mut served = Served {
            child,
            url: String::new(),
        };
        served.url = match line.recv_timeout(Duration::from_secs(120)) {
            Ok(Some(url)) => url,
            other => panic!("server.sh printed no URL as its first line: {other:?}"),
        };
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Runs the suite's server scenarios with `args`; its exit status and report.
fn suite(release: Release, url: &str, args: &[&str]) -> (bool, String) {
    let out = conformance_suite(release)
        .args(["server", "--url", url])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the conformance suite: {e}"));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), report)
}

/// Scenarios the report shows as passed (`✓ name: ...`).
fn passed(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter_map(|l| l.trim().strip_prefix("✓ "))
        .filter_map(|l| l.split(':').next())
        .collect()
}

#[test]
fn every_scored_server_scenario_passes_through_a_virtual_server() {
    let served = Served::start();
    assert!(served.url.ends_with("/v/conf/mcp"), "{}", served.url);

    let (ok, report) = suite(Release::Stable, &served.url, &["--suite", "active"]);
    assert!(ok, "0.1.16 server scenarios failed:\n{report}");
    let stable = passed(&report);
    assert!(
        stable.len() >= 30,
        "only {} scenarios passed:\n{report}",
        stable.len()
    );
    for needed in [
        "tools-call-sampling",
        "tools-call-with-progress",
        "tools-call-with-logging",
        "elicitation-sep1330-enums",
        "resources-templates-read",
        "prompts-get-with-args",
        "completion-complete",
    ] {
        assert!(stable.contains(&needed), "{needed} did not pass:\n{report}");
    }

    let (ok, report) = suite(
        Release::Next,
        &served.url,
        &["--requirements", "2025-11-25"],
    );
    assert!(
        ok,
        "0.2.0-alpha.12 scenarios for 2025-11-25 failed:\n{report}"
    );
    assert!(passed(&report).len() >= 30, "{report}");

    let (ok, report) = suite(
        Release::Next,
        &served.url,
        &["--requirements", "2026-07-28"],
    );
    assert!(
        ok,
        "0.2.0-alpha.12 scenarios for 2026-07-28 failed:\n{report}"
    );
    let modern = passed(&report);
    for needed in [
        "server-stateless",
        "caching",
        "sep-2164-resource-not-found",
        "input-required-result-multiple-input-requests",
        "input-required-result-multi-round",
        "input-required-result-tampered-state",
        "input-required-result-capability-check",
        "input-required-result-non-tool-request",
    ] {
        assert!(modern.contains(&needed), "{needed} did not pass:\n{report}");
    }
}

#[test]
fn a_change_of_the_upstreams_tools_reaches_a_2025_session_as_list_changed() {
    let served = Served::start();
    let out = Command::new(python_sdk())
        .arg(peer_file("northbound_changes.py"))
        .arg(&served.url)
        .arg("test_trigger_tool_change")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the client: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(report["told"], true, "never told: {report}");
    let (before, after) = (
        report["before"].as_array().unwrap(),
        report["after"].as_array().unwrap(),
    );
    let added: Vec<&Value> = after.iter().filter(|t| !before.contains(t)).collect();
    assert_eq!(added.len(), 1, "{report}");
    assert!(
        added[0]
            .as_str()
            .unwrap_or_default()
            .starts_with("fixture__test_added_tool"),
        "{report}"
    );
    // Every name it had before is still there, unchanged.
    assert!(before.iter().all(|t| after.contains(t)), "{report}");
    eprintln!(
        "told of the change after {:.2} s",
        report["seconds"].as_f64().unwrap_or_default()
    );
}
