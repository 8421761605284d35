//! `sandbox` scenario of the MCP suite: what the sandbox costs, against the
//! same work unconfined, alternating in one run (the baseline):
//! - `launch`: starting a process to the point it runs (a trivial
//!   program, `/bin/cat`): plain spawn against the launcher's namespaces,
//!   mounts, Landlock and seccomp, reported back;
//! - `start`: connecting server-everything (spawn and MCP handshake);
//! - `call`: a tool call (`echo`) to a confined and an unconfined server;
//! - `decide`: the plan the node computes before a launch (no baseline).

use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_proto::v1::Sandbox;
use spearlet::connections::Connections;
use spearlet::env_refs::Redactor;
use spearlet::mcp::{Confined, McpClient, SessionOptions, StdioChild, StdioCommand};
use spearlet::node_policy::SandboxSection;
use spearlet::sandbox::{Decision, Sandboxing};

use super::{everything, percentile, registry, spec, us};

fn sandboxing() -> Sandboxing {
    let mut sandboxing = Sandboxing::new(Vec::new(), Arc::new(SandboxSection::default), None);
    // The bench binary is not a spearlet: the launcher beside the one
    // cargo built (`spear-sandbox`, built by `--workspace --bins`).
    sandboxing.launcher = Ok(spear_sandbox::launcher_beside(std::path::Path::new(env!(
        "CARGO_BIN_EXE_spearlet"
    ))));
    sandboxing
}

fn report(name: &str, plain: &mut [Duration], confined: &mut [Duration]) {
    let (p50, c50) = (percentile(plain, 0.5), percentile(confined, 0.5));
    let (p99, c99) = (percentile(plain, 0.99), percentile(confined, 0.99));
    println!(
        "sandbox {name}: unconfined p50 {:.1} µs p99 {:.1} µs | confined p50 {:.1} µs p99 {:.1} µs | added p50 {:.1} µs",
        us(p50),
        us(p99),
        us(c50),
        us(c99),
        us(c50) - us(p50)
    );
}

async fn launch(rounds: usize) {
    let sandboxing = sandboxing();
    let command = StdioCommand {
        program: "/bin/cat".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
    };
    let server = spec("cat", "/bin/cat", &[]);
    let Decision::Confine { launcher, plan } = sandboxing.decide(&server, &command) else {
        panic!("cat is not confined")
    };
    let (mut plain, mut confined) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let started = Instant::now();
        let (mut child, _, _) = StdioChild::spawn("cat", &command, Arc::new(Redactor::default()))
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        plain.push(started.elapsed());
        child.shutdown(Duration::from_millis(200)).await;
        let started = Instant::now();
        let within = Duration::from_secs(10);
        let how = Confined {
            launcher: &launcher,
            plan: &plan,
            egress: None,
            within,
        };
        let (mut child, _, _) =
            StdioChild::spawn_confined("cat", &command, Arc::new(Redactor::default()), how)
                .await
                .unwrap_or_else(|e| panic!("confined spawn: {e}"));
        confined.push(started.elapsed());
        child.shutdown(Duration::from_millis(200)).await;
    }
    report("launch (/bin/cat)", &mut plain, &mut confined);
}

async fn start(rounds: usize) {
    let server = spec("everything", &everything(), &["stdio"]);
    let lookup = |_: &str| -> Result<Option<String>, spearlet::node_policy::Refused> { Ok(None) };
    let (mut plain, mut confined) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (samples, sandbox) in [(&mut plain, None), (&mut confined, Some(sandboxing()))] {
            let options = SessionOptions {
                sandbox,
                ..SessionOptions::default()
            };
            let started = Instant::now();
            let client = McpClient::connect(&server, &lookup, options)
                .await
                .unwrap_or_else(|e| panic!("connect: {e}"));
            samples.push(started.elapsed());
            client.shutdown().await;
        }
    }
    report(
        "start (server-everything handshake)",
        &mut plain,
        &mut confined,
    );
}

async fn call(calls: usize) {
    let plain_server = spec("plain", &everything(), &["stdio"]);
    let mut confined_server = spec("confined", &everything(), &["stdio"]);
    confined_server.sandbox = Some(Sandbox::default());
    let lookup: spearlet::connections::Lookup = Arc::new(|_: &str| Ok(None));
    let plain = Connections::new(registry(vec![plain_server]), Arc::clone(&lookup));
    let confined = Connections::with_options(
        registry(vec![confined_server]),
        lookup,
        SessionOptions {
            sandbox: Some(sandboxing()),
            ..SessionOptions::default()
        },
    );
    let arguments = || {
        serde_json::json!({"message": "benchmark"})
            .as_object()
            .cloned()
    };
    let (mut p, mut c) = (Vec::new(), Vec::new());
    for i in 0..calls + 200 {
        for (samples, connections, id) in
            [(&mut p, &plain, "plain"), (&mut c, &confined, "confined")]
        {
            let started = Instant::now();
            connections
                .call(id, "echo", arguments())
                .await
                .unwrap_or_else(|e| panic!("call {id}: {e}"));
            if i >= 200 {
                samples.push(started.elapsed());
            }
        }
    }
    report("call (echo)", &mut p, &mut c);
    plain.shutdown().await;
    confined.shutdown().await;
}

/// What the node decides before a launch: the plan for server-everything
/// (its program and `#!` interpreter resolved, its code tree found).
fn decide(rounds: usize) {
    let sandboxing = sandboxing();
    let server = spec("everything", &everything(), &["stdio"]);
    let command = StdioCommand {
        program: everything(),
        args: vec!["stdio".into()],
        env: Vec::new(),
        cwd: None,
    };
    let mut took = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let decision = sandboxing.decide(&server, &command);
        took.push(started.elapsed());
        assert!(matches!(decision, Decision::Confine { .. }), "{decision:?}");
    }
    println!(
        "sandbox decide (server-everything plan): p50 {:.1} µs p99 {:.1} µs",
        us(percentile(&mut took, 0.5)),
        us(percentile(&mut took, 0.99))
    );
}

pub async fn run() {
    if let Ok(launcher) = &sandboxing().launcher {
        println!("sandbox launcher: {}", launcher.display());
    }
    decide(200);
    launch(200).await;
    start(60).await;
    call(2000).await;
}
