//! OAuth 2.1 against an authorization server no one here wrote
//! (oauth2-mock-server, npm) guarding a Python SDK 1.x MCP server that
//! checks every token's signature, issuer and scope: `spearlet mcp` logs
//! in with client credentials and with the authorization code (PKCE, a
//! loopback redirect reached by a "browser" that follows the server's
//! redirect), and none of the secrets shows in its output, even at trace.

use std::process::Command;

use spear_tests::peers::{
    assert_no_secret, node22, npm_dir, oauth_protected_server, spearlet_mcp, LinePeer,
};

/// The authorization server, and every line it printed.
struct AuthServer {
    peer: LinePeer,
    issuer: String,
}

impl AuthServer {
    fn start() -> AuthServer {
        let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("peers/oauth_mock_server.mjs");
        let mut command = Command::new(node22());
        command.arg(script).arg(npm_dir());
        let peer = LinePeer::start(command);
        let issuer = peer.wait_for("READY ");
        AuthServer { peer, issuer }
    }

    fn said(&self, prefix: &str) -> Vec<String> {
        self.peer.values(prefix)
    }
}

#[test]
fn client_credentials_buy_a_token_the_server_accepts() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let server = oauth_protected_server(&auth.issuer, &tokens);
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
    assert_no_secret("spearlet's output", &format!("{out}{err}"), &secrets);
}

#[test]
fn an_operator_logs_in_with_the_authorization_code() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let server = oauth_protected_server(&auth.issuer, &tokens);
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
    assert_no_secret("spearlet's output", &format!("{out}{err}"), &secrets);
}

#[test]
fn without_declared_scopes_the_login_asks_for_what_the_server_publishes() {
    let auth = AuthServer::start();
    let dir = tempfile::tempdir().unwrap();
    let server = oauth_protected_server(&auth.issuer, &dir.path().join("tokens"));
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
    let server = oauth_protected_server(&auth.issuer, &dir.path().join("tokens"));
    let (code, _, err) = spearlet_mcp(&["list-tools", "--url", &server.url("/mcp")], &[], "");
    assert_ne!(code, 0);
    assert!(
        err.contains(
            "the server answered 401 Unauthorized: it needs an OAuth token, and none was given"
        ) && err.contains("declare \"auth\" in its server file")
            && err.contains("pass --oauth"),
        "{err}"
    );
    // One sentence: no log line around it at the default level.
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
