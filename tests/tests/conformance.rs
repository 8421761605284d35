//! The MCP conformance suite's client scenarios (`@modelcontextprotocol/
//! conformance`, the spec's own tests) against `spearlet mcp`, driven by
//! tests/conformance/client.sh as an operator would type the commands:
//! every scenario of the newest stable release, and every client scenario
//! of the newest pre-release (protocol 2026-07-28) but the skills
//! extension's (SEP-2640: Spear does not load skills).

use std::path::PathBuf;

use spear_tests::peers::{conformance_suite, Release};
use spear_tests::procs::bin;

/// Scenarios expected to fail, each with why. Anything else must pass
/// (none today: DPoP, workload identity and enterprise-managed
/// authorization are all built).
const NOT_YET: &[(&str, &str)] = &[];

/// The one stable scenario whose mock is wrong: its authorization-server
/// metadata, served at the server's root, names the issuer `<root>/oauth`.
/// RFC 8414 §3.3 says such metadata MUST NOT be used, so the node refuses
/// it (the pre-release fixed the mock, and the node passes it there, and
/// its new `auth/metadata-issuer-mismatch` asks for exactly this refusal).
const STABLE_MOCK_ISSUER_MISMATCH: &str = "auth/2025-03-26-oauth-metadata-backcompat";

/// The client scenarios a suite lists, with their spec versions.
fn listed_scenarios(release: Release) -> Vec<String> {
    let out = conformance_suite(release)
        .args(["list", "--client"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|entry| entry.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Runs one scenario; whether it passed, and the suite's report with the
/// client's output.
fn run(release: Release, scenario: &str) -> (bool, String) {
    run_with(release, scenario, &[])
}

/// [`run`], with more environment for client.sh.
fn run_with(release: Release, scenario: &str, env: &[(&str, &str)]) -> (bool, String) {
    let client = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance/client.sh");
    let out = conformance_suite(release)
        .envs(env.iter().copied())
        .args([
            "client",
            "--scenario",
            scenario,
            "--timeout",
            "60000",
            "--command",
        ])
        .arg(&client)
        .env("SPEARLET_BIN", bin("spearlet"))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && report.contains("OVERALL: PASSED"),
        report,
    )
}

/// Runs `scenarios`; the reports of those that did not do as expected.
fn unexpected(release: Release, scenarios: &[String]) -> Vec<String> {
    let mut wrong = Vec::new();
    for scenario in scenarios {
        if NOT_YET.iter().any(|(name, _)| name == scenario) {
            continue;
        }
        let (passed, report) = run(release, scenario);
        let as_expected = if release == Release::Stable && scenario == STABLE_MOCK_ISSUER_MISMATCH {
            !passed && report.contains("Authorization server issuer mismatch")
        } else {
            passed
        };
        if !as_expected {
            wrong.push(format!("--- {scenario} ---\n{report}"));
        }
    }
    wrong
}

#[test]
fn every_stable_client_scenario_passes() {
    let listed = listed_scenarios(Release::Stable);
    for known in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "auth/metadata-default",
        "auth/scope-step-up",
        "auth/pre-registration",
        "auth/client-credentials-basic",
        "auth/cross-app-access-complete-flow",
        STABLE_MOCK_ISSUER_MISMATCH,
    ] {
        assert!(
            listed.iter().any(|s| s == known),
            "{known} not listed: {listed:?}"
        );
    }
    let wrong = unexpected(Release::Stable, &listed);
    assert!(
        wrong.is_empty(),
        "{} of {} did not do as expected:\n{}",
        wrong.len(),
        listed.len(),
        wrong.join("\n")
    );
}

/// The skills extension (SEP-2640): its scenarios test a client that
/// loads skills from a server, which Spear does not do.
const SKILLS_EXTENSION: &str = "sep-2640-";

#[test]
fn every_pre_release_client_scenario_passes() {
    let listed: Vec<String> = listed_scenarios(Release::Next)
        .into_iter()
        .filter(|s| !s.starts_with(SKILLS_EXTENSION))
        .collect();
    for known in [
        STABLE_MOCK_ISSUER_MISMATCH,
        "auth/metadata-issuer-mismatch",
        "auth/iss-wrong-issuer",
        "auth/authorization-server-migration",
        "auth/resource-mismatch",
        "auth/enterprise-managed-authorization",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ] {
        assert!(
            listed.iter().any(|s| s == known),
            "{known} not listed: {listed:?}"
        );
    }
    let wrong = unexpected(Release::Next, &listed);
    assert!(
        wrong.is_empty(),
        "{} of {} did not do as expected:\n{}",
        wrong.len(),
        listed.len(),
        wrong.join("\n")
    );
}

/// A workload JWT that is expired is refused by the authorization server:
/// the node says why, once, and neither retries it nor falls back to
/// another grant. One made for another audience is never sent at all: the
/// server names its authorization server, so a hostile one could collect
/// JWTs good elsewhere.
#[test]
fn a_refused_workload_jwt_is_said_and_not_retried() {
    let (passed, report) = run_with(
        Release::Next,
        "auth/wif-jwt-bearer",
        &[("WIF_ASSERTION", "expired_jwt")],
    );
    assert!(!passed, "the expired JWT was accepted:\n{report}");
    assert!(
        report.contains(
            "the authorization server refused the workload's JWT (400 Bad Request): invalid_grant: JWT assertion is expired"
        ),
        "{report}"
    );
    for retried in ["wif-no-retry", "wif-grant-fallback", "valid-bearer-token"] {
        assert!(!report.contains(retried), "expired: {retried}\n{report}");
    }

    let (passed, report) = run_with(
        Release::Next,
        "auth/wif-jwt-bearer",
        &[("WIF_ASSERTION", "wrong_audience_jwt")],
    );
    assert!(!passed, "the wrong-audience JWT was accepted:\n{report}");
    assert!(
        report.contains("the workload's JWT is for https://wrong.example and the server's authorization server is http://localhost:")
            && report.contains("it is not sent there"),
        "{report}"
    );
    assert!(
        report.contains("Client did not make a JWT-bearer token request"),
        "{report}"
    );
    for retried in ["wif-no-retry", "wif-grant-fallback", "valid-bearer-token"] {
        assert!(
            !report.contains(retried),
            "wrong audience: {retried}\n{report}"
        );
    }
}
