//! The hostile remote peer and the cluster around it, for remote_hostile.rs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::peer_file;
use spear_tests::procs::{rss_kib, Proc};
use spear_tests::tasks::{cluster_opts, guest, register, Cluster, ClusterOptions};
use spear_tests::wait::eventually;
use spearlet::tools::offered_name;

/// How much the node's resident memory may grow over a hostile run.
pub const RSS_GROWTH_BOUND_KIB: u64 = 64 * 1024;
/// What the node says when a server's stream goes past its bound ("the
/// server sent more than 10000 events on one response stream").
pub const EVENTS_BOUND: &str = "more than 10000 events";
/// What a call whose answer stream the node cut fails with.
pub const ANSWER_CUT: &str = "the server's answer ended before its result";
/// The node's bound itself: a flood that was cut off sent more than this.
pub const EVENTS_BOUND_COUNT: u64 = 10_000;
/// Events a stream may still count over two seconds once the node has
/// closed it (none, when it has; a few batches in flight at most).
pub const LATE_EVENTS_BOUND: u64 = 5_000;
/// What the egress guard says of the canary's address.
pub const CANARY_REFUSED: &str = "127.0.0.3 is a loopback address";
pub const HOSTILE_SECRET: &str = "hostile-s3cret-4f1c9a";

/// The hostile peer: its process, its address and its canary's port.
pub struct Peer {
    /// Killed (its log printed when the test fails) before its dir goes.
    _proc: Proc,
    /// `127.0.0.1:PORT`, for [`spear_tests::http::get_json`].
    pub addr: String,
    pub canary: Option<u16>,
    _dir: tempfile::TempDir,
}

impl Peer {
    /// Starts tests/peers/hostile_remote.py with `env`; with `canary`, also
    /// its canary on 127.0.0.3. Returns once both port files are written.
    pub fn start(env: &[(&str, &str)], canary: bool) -> Peer {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let port_file = dir.path().join("port");
        let canary_file = dir.path().join("canary-port");
        let mut cmd = Command::new("python3");
        cmd.arg(peer_file("hostile_remote.py")).arg(&port_file);
        for (name, value) in env {
            cmd.env(name, value);
        }
        if canary {
            cmd.env("CANARY_PORT_FILE", &canary_file);
        } else {
            cmd.env_remove("CANARY_PORT_FILE");
        }
        let mut proc = Proc::spawn("hostile_remote.py", cmd, dir.path().join("peer.log"));
        // The canary's file is written before the server's.
        let port = eventually(
            "the hostile peer to listen",
            Duration::from_secs(30),
            || {
                if !proc.is_running() {
                    panic!("hostile_remote.py exited:\n{}", proc.log());
                }
                read_port(&port_file)
            },
        );
        let canary = canary.then(|| read_port(&canary_file).unwrap_or_else(|e| panic!("{e}")));
        Peer {
            _proc: proc,
            addr: format!("127.0.0.1:{port}"),
            canary,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The peer's `GET /stats`.
    pub fn stats(&self) -> Value {
        spear_tests::http::get_json(&self.addr, "/stats").unwrap_or_else(|e| panic!("{e}"))
    }

    /// A counter of [`Peer::stats`] (`flood_events_sent`, ...).
    pub fn counter(&self, name: &str) -> u64 {
        let stats = self.stats();
        stats[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no counter {name} in {stats}"))
    }

    /// Waits until the peer writes no stream of `kind` (the node closed
    /// them), then checks that `counter` stops: it grew by at most
    /// [`LATE_EVENTS_BOUND`] over two seconds. Returns what it had sent.
    pub fn assert_stream_closed(&self, kind: &str, counter: &str) -> u64 {
        eventually(
            &format!("the node to close the {kind} stream"),
            Duration::from_secs(15),
            || {
                let stats = self.stats();
                (stats["open_streams"][kind] == 0)
                    .then_some(())
                    .ok_or(stats.to_string())
            },
        );
        let before = self.counter(counter);
        // Two reads of a counter that must not grow, 2 s apart.
        std::thread::sleep(Duration::from_secs(2));
        let after = self.counter(counter);
        eprintln!("{counter}: {before}, then {after} two seconds later");
        assert!(
            after - before <= LATE_EVENTS_BOUND,
            "the {kind} stream kept flowing: {counter} went from {before} to {after} in 2 s; stats: {}",
            self.stats()
        );
        after
    }
}

/// The port a peer wrote to `file` (renamed into place: whole, or absent).
pub fn read_port(file: &Path) -> Result<u16, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    text.trim()
        .parse()
        .map_err(|e| format!("{} holds '{text}': {e}", file.display()))
}

/// One tool call of a recording: (call id, server, tool, arguments).
pub type Call<'a> = (&'a str, &'a str, &'a str, &'a str);

/// A recording that makes `calls`, one a turn, then answers with every
/// result, each between `[ID]` and `[/ID]` lines (see [`section`]).
pub fn recording(dir: &Path, name: &str, calls: &[Call<'_>]) -> PathBuf {
    let mut turns: Vec<Value> = calls
        .iter()
        .map(|(id, server, tool, args)| {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                   "function": {"name": offered_name(server, tool), "arguments": args}}]})
        })
        .collect();
    let answer: String = calls
        .iter()
        .map(|(id, ..)| format!("[{id}]\n{{{{tool_result:{id}}}}}\n[/{id}]\n"))
        .collect();
    turns.push(json!({"role": "assistant", "content": answer}));
    let path = dir.join(format!("{name}-model.json"));
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// What the run said of call `id`: the text between `[id]` and `[/id]`.
pub fn section(out: &str, id: &str) -> String {
    let start = format!("[{id}]\n");
    let end = format!("\n[/{id}]");
    out.split_once(&start)
        .and_then(|(_, rest)| rest.split_once(&end))
        .map(|(text, _)| text.to_string())
        .unwrap_or_else(|| panic!("no result of {id} in the run: {out}"))
}

/// A call that failed as the node says a server's failure to the model.
pub fn failed(text: &str, server: &str, tool: &str) -> bool {
    text.contains(&format!("tool '{tool}' of server '{server}' failed"))
}

/// The cluster: the filesystem server, `servers` (a shared-shape file's
/// `mcpServers`) in mcp.d/hostile.json, a task `hostile` on them and `fs`
/// whose model replays `hostile`, and a task `warm` on `fs` alone (a run
/// to take the node's memory baseline after). `sms_args` go to `sms serve`.
pub fn cluster_with(
    work: &Path,
    servers: Value,
    hostile: PathBuf,
    sms_args: Vec<String>,
) -> Cluster {
    let ids: Vec<String> = servers
        .as_object()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default();
    let warm = recording(
        work,
        "warm",
        &[("call_fs", "fs", "list_allowed_directories", "{}")],
    );
    let c = cluster_opts(
        "notes for the filesystem server",
        ClusterOptions {
            models: vec![("hostile", hostile), ("warm", warm)],
            sms_args,
            ..Default::default()
        },
    );
    let file = json!({ "mcpServers": servers });
    std::fs::write(c.work.path().join("mcp.d/hostile.json"), file.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    eventually(
        "the hostile servers on the node",
        Duration::from_secs(30),
        || {
            let persisted = c.node.persisted_servers();
            ids.iter()
                .all(|id| persisted.contains(id))
                .then_some(())
                .ok_or(format!("{persisted:?}; sms: {}", c.sms.status()))
        },
    );
    let mut all = ids.clone();
    all.push("fs".into());
    for (task, backend, servers) in [
        ("hostile", "hostile", all),
        ("warm", "warm", vec!["fs".into()]),
    ] {
        let config = json!({"mcp": {"enabled": true, "allowed_server_ids": servers,
                                    "default_server_ids": servers},
                            "llm": {"backend": backend}, "limits": {"wall_ms": 120000}});
        let (code, _, err) = register(&c, task, &guest("task-agent"), &config, &[]);
        assert_eq!(code, 0, "{err}");
    }
    c
}

/// Runs task `task`: exit code, stdout and stderr.
pub fn invoke(c: &Cluster, task: &str) -> (i32, String, String) {
    c.sms.client(&["invoke", task])
}

/// Runs `warm` (the filesystem server only), so the memory baseline taken
/// after it holds what any run needs; returns the node's RSS then.
pub fn warm_baseline(c: &Cluster, pid: u32) -> u64 {
    let (code, out, err) = invoke(c, "warm");
    assert_eq!(code, 0, "the warm-up run failed: {out}{err}");
    let fs = section(&out, "call_fs");
    assert!(
        fs.contains(&c.files.display().to_string()),
        "the filesystem server did not answer the warm-up run: {fs}"
    );
    rss_kib(pid)
}

/// Runs `f` while sampling `pid`'s resident memory every 50 ms; returns
/// what `f` returned and the most memory seen.
pub fn with_peak_rss<T>(pid: u32, f: impl FnOnce() -> T) -> (T, u64) {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut peak = rss_kib(pid);
            while !done.load(Ordering::SeqCst) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(50));
            }
            peak.max(rss_kib(pid))
        });
        let value = f();
        done.store(true, Ordering::SeqCst);
        let peak = sampler
            .join()
            .unwrap_or_else(|_| panic!("the memory sampler panicked"));
        (value, peak)
    })
}

pub fn assert_memory_bounded(baseline: u64, peak: u64) {
    eprintln!("node RSS: {baseline} KiB before the hostile run, at most {peak} KiB during it");
    assert!(
        peak <= baseline + RSS_GROWTH_BOUND_KIB,
        "the node grew from {baseline} to {peak} KiB (bound: +{RSS_GROWTH_BOUND_KIB} KiB)"
    );
}

/// Server `id`'s entry in the node's status.
pub fn server_status(c: &Cluster, id: &str) -> Value {
    let status = c.node.status().unwrap_or_else(|e| panic!("{e}"));
    status["mcp_servers"][id].clone()
}
