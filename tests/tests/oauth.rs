//! OAuth 2.1 against an authorization server no one here wrote
//! (oauth2-mock-server, npm) guarding a Python SDK 1.x MCP server that
//! checks every token's signature, issuer and scope: `spearlet mcp` logs
//! in with client credentials and with the authorization code (PKCE, a
//! loopback redirect reached by a "browser" that follows the server's
//! redirect), and none of the secrets shows in its output, even at trace.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use spear_tests::peers::{node22, npm_dir, python_sdk, spearlet_mcp, HttpPeer};
use spear_tests::wait::{eventually, free_port};

/// The authorization server, and every line it printed.
struct AuthServer {
    child: Child,
    issuer: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AuthServer {
    fn start() -> AuthServer {
        let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("peers/oauth_mock_server.mjs");
        let mut child = Command::new(node22())
            .arg(script)
            .arg(npm_dir())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let issuer = eventually(
            "the authorization server to listen",
            std::time::Duration::from_secs(30),
            || {
                lines
                    .lock()
                    .unwrap()
                    .iter()
                    .find_map(|l| l.strip_prefix("READY ").map(str::to_string))
                    .ok_or_else(|| "not yet".to_string())
            },
        );
        AuthServer {
            child,
            issuer,
            lines,
        }
    }

    fn said(&self, prefix: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix(prefix).map(str::to_string))
            .collect()
    }
}

fn protected_server(issuer: &str, tokens: &std::path::Path) -> HttpPeer {
    let port = free_port();
    let mut cmd = Command::new(python_sdk());
    cmd.arg(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/python_oauth_server.py"),
    )
    .arg(port.to_string())
    .arg(issuer)
    .arg(tokens);
    HttpPeer::start("python sdk server behind OAuth", cmd, port)
}

/// Asserts no secret appears in `output`.
fn assert_no_secret(output: &str, secrets: &[String]) {
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        assert!(
            !output.contains(secret.as_str()),
            "a secret ({}…) is in spearlet's output:\n{output}",
            &secret[..4]
        );
    }
}

#[test]
fn client_credentials_buy_a_token_the_server_accepts() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let server = protected_server(&auth.issuer, &tokens);
    let secret = "m2m-secret-4f1c9a7e";
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--url",
            &server.url("/mcp"),
            "--client-credentials",
            "--client-id",
            "spear-m2m",
            "--client-secret",
            "${M2M_SECRET}",
            "--scope",
            "docs:read",
            "--tool",
            "whoami",
        ],
        &[("M2M_SECRET", secret)],
        "trace",
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.starts_with("authorized\n"), "{out}");
    assert_eq!(auth.said("GRANT "), ["client_credentials spear-m2m"]);
    let accepted: Vec<String> = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(!accepted.is_empty(), "the server saw no token");
    let mut secrets = accepted;
    secrets.push(secret.to_string());
    assert_no_secret(&format!("{out}{err}"), &secrets);
}

#[test]
fn an_operator_logs_in_with_the_authorization_code() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let server = protected_server(&auth.issuer, &tokens);
    let secret = "app-secret-8d2e5b13";
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--url",
            &server.url("/mcp"),
            "--client-id",
            "spear-app",
            "--client-secret",
            "${APP_SECRET}",
            "--scope",
            "docs:read",
            "--browser",
            "curl -sS -o /dev/null -L",
            "--tool",
            "whoami",
        ],
        &[("APP_SECRET", secret)],
        "trace",
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.starts_with("authorized\n"), "{out}");
    // The scope asked for, with PKCE.
    assert!(
        err.contains("Open this URL to authorize:") && err.contains("scope=docs%3Aread"),
        "{err}"
    );
    assert!(err.contains("code_challenge_method=S256"), "{err}");
    // (The mock signs an ID token beside the access token: two lines.)
    let grants = auth.said("GRANT ");
    assert!(
        !grants.is_empty() && grants.iter().all(|g| g == "authorization_code spear-app"),
        "{grants:?}"
    );
    let codes = auth.said("CODE ");
    assert_eq!(codes.len(), 1);
    let mut secrets: Vec<String> = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(!secrets.is_empty(), "the server saw no token");
    secrets.extend(codes);
    secrets.push(secret.to_string());
    assert_no_secret(&format!("{out}{err}"), &secrets);
}

#[test]
fn without_declared_scopes_the_login_asks_for_what_the_server_publishes() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let server = protected_server(&auth.issuer, &dir.path().join("tokens"));
    let (code, out, err) = spearlet_mcp(
        &[
            "call",
            "--url",
            &server.url("/mcp"),
            "--oauth",
            "--client-id",
            "spear-app",
            "--browser",
            "curl -sS -o /dev/null -L",
            "--tool",
            "whoami",
        ],
        &[],
        "warn",
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // The challenge names no scope; the resource metadata lists docs:read.
    assert!(err.contains("scope=docs%3Aread"), "{err}");
}

#[test]
fn a_protected_server_without_auth_says_what_to_declare() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let server = protected_server(&auth.issuer, &dir.path().join("tokens"));
    let (code, _, err) = spearlet_mcp(&["list-tools", "--url", &server.url("/mcp")], &[], "warn");
    assert_ne!(code, 0);
    assert!(
        err.contains("the server answered 401 Unauthorized: it needs an OAuth token this node does not hold (declare \"auth\" in its server file)"),
        "{err}"
    );
}
