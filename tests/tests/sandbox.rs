//! The sandbox against hostile guests and hostile tasks, on the real `sms`
//! and `spearlet` binaries (docs/guest-api.md, "Limits of a run"; docs/tasks.md, "Node policy").
//!
//! Every hostile task is invoked at once on a node with six run slots, so
//! every slot is held by a hostile guest at some point, while a normal
//! guest (fs-agent) is invoked too. Throughout, the node's `/status` must
//! answer every probe within 200 ms, SMS must keep seeing the node alive,
//! and the node's RSS must stay under a stated bound. Each hostile run must
//! end with its own reason within its limit plus a second. A dropped
//! invocation and the compiled-module cache are in sandbox_runs.rs.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spear_tests::guest_wat::wat;
use spear_tests::invoke::invoke;
use spear_tests::procs::{bin, rss_kib};
use spear_tests::tasks::{cluster_opts, fs_task, guest, register, repo_file, ClusterOptions};

/// The node's RSS bound while hostile guests run: without the host-memory
/// budget, the amplification guest alone asks the node for 3 GiB.
const RSS_BOUND_KIB: u64 = 768 * 1024;
/// Every `/status` probe answers within this.
const PROBE_BOUND: Duration = Duration::from_millis(200);

/// A hostile guest, how it is limited and the words its end must carry.
struct Hostile {
    id: &'static str,
    body: &'static str,
    config: Value,
    reason: &'static str,
    /// The limit the reason refers to, in ms of wall time or of CPU.
    limit_ms: u64,
    cpu: bool,
}

fn hostile_guests() -> Vec<Hostile> {
    vec![
        Hostile {
            id: "hostcall-spin",
            // Never yields on its own: a cheap host call in a tight loop.
            body: r#"(func (export "_start") (loop (drop (call $close (i32.const -1))) (br 0)))"#,
            config: json!({"limits": {"wall_ms": 2000, "cpu_ms": 600000}}),
            reason: "wall-clock limit",
            limit_ms: 2000,
            cpu: false,
        },
        Hostile {
            id: "compute-spin",
            body: r#"(func (export "_start") (loop (br 0)))"#,
            config: json!({"limits": {"cpu_ms": 1000}}),
            reason: "CPU budget",
            limit_ms: 1000,
            cpu: true,
        },
        Hostile {
            id: "compute-rare-hostcalls",
            // A host call every 2^22 iterations must not refill the budget.
            body: r#"(func (export "_start") (local $i i32)
                (loop
                  (local.set $i (i32.add (local.get $i) (i32.const 1)))
                  (if (i32.eqz (i32.and (local.get $i) (i32.const 0x3fffff)))
                    (then (drop (call $close (i32.const -1)))))
                  (br 0)))"#,
            config: json!({"limits": {"cpu_ms": 1000}}),
            reason: "CPU budget",
            limit_ms: 1000,
            cpu: true,
        },
        Hostile {
            id: "amplify",
            // The same 1 MiB buffer written 1,024 times in each of 3
            // sessions, ignoring every error: 3 GiB of host memory asked.
            body: r#"(func (export "_start") (local $s i32) (local $n i32) (local $h i32)
                (loop $sessions
                  (local.set $h (call $create))
                  (local.set $n (i32.const 0))
                  (loop $writes
                    (drop (call $write (local.get $h) (i32.const 1200000) (i32.const 4) (i32.const 0) (i32.const 1048576)))
                    (local.set $n (i32.add (local.get $n) (i32.const 1)))
                    (br_if $writes (i32.lt_u (local.get $n) (i32.const 1024))))
                  (local.set $s (i32.add (local.get $s) (i32.const 1)))
                  (br_if $sessions (i32.lt_u (local.get $s) (i32.const 3)))))"#,
            config: json!({"limits": {"wall_ms": 20000}}),
            reason: "host-memory budget",
            limit_ms: 20000,
            cpu: false,
        },
        Hostile {
            id: "growing-history",
            // One send against a model that never stops calling tools,
            // then another after being refused.
            body: r#"(func (export "_start") (local $h i32)
                (local.set $h (call $create))
                (drop (call $write (local.get $h) (i32.const 1200000) (i32.const 4) (i32.const 1200008) (i32.const 23)))
                (drop (call $send (local.get $h) (i32.const 1)))
                (drop (call $send (local.get $h) (i32.const 1))))"#,
            config: json!({
                "mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
                "llm": {"backend": "never-stops"},
                "limits": {"host_memory_mb": 4, "max_iterations": 1000, "max_total_tool_calls": 10000,
                           "max_tool_calls": 10000, "max_model_requests": 10000, "wall_ms": 30000},
            }),
            reason: "host-memory budget",
            limit_ms: 30000,
            cpu: false,
        },
        Hostile {
            id: "send-loop",
            // Sends forever, a new session each time, ignoring errors.
            body: r#"(func (export "_start") (local $h i32)
                (loop
                  (local.set $h (call $create))
                  (drop (call $write (local.get $h) (i32.const 1200000) (i32.const 4) (i32.const 1200008) (i32.const 23)))
                  (drop (call $send (local.get $h) (i32.const 1)))
                  (drop (call $close (local.get $h)))
                  (br 0)))"#,
            config: json!({"limits": {"max_model_requests": 6, "wall_ms": 20000}}),
            reason: "limits.max_model_requests",
            limit_ms: 20000,
            cpu: false,
        },
    ]
}

/// Watches the node while the suite runs: `/status` latency, SMS's view of
/// the node, and the node's RSS.
struct Watch {
    stop: Arc<AtomicBool>,
    worst_probe: Arc<Mutex<(Duration, String)>>,
    max_rss_kib: Arc<Mutex<u64>>,
    sms_saw_dead: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(node_http: String, node_pid: u32, sms_grpc: String) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let worst_probe = Arc::new(Mutex::new((Duration::ZERO, String::new())));
        let max_rss_kib = Arc::new(Mutex::new(0));
        let sms_saw_dead = Arc::new(Mutex::new(Vec::new()));
        let probe = {
            let (stop, worst, rss) = (stop.clone(), worst_probe.clone(), max_rss_kib.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let answer = spear_tests::http::get(&node_http, "/status");
                    let took = started.elapsed();
                    let mut worst = worst.lock().unwrap();
                    if answer.is_err() || took > worst.0 {
                        *worst = (
                            took.max(worst.0),
                            format!("{answer:?}").chars().take(200).collect(),
                        );
                    }
                    if answer.is_err() {
                        worst.0 = Duration::MAX;
                    }
                    drop(worst);
                    let mut max = rss.lock().unwrap();
                    *max = (*max).max(rss_kib(node_pid));
                    drop(max);
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        let alive = {
            let (stop, dead) = (stop.clone(), sms_saw_dead.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let out = Command::new(bin("sms"))
                        .args(["status", "--json", "--addr", &sms_grpc])
                        .env_remove("SMS_ADMIN_TOKEN")
                        .output();
                    let status: Value = out
                        .ok()
                        .and_then(|o| serde_json::from_slice(&o.stdout).ok())
                        .unwrap_or(Value::Null);
                    let alive = status["nodes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|n| n["node_id"] == "node-a" && n["alive"] == true);
                    if !alive {
                        dead.lock().unwrap().push(status.to_string());
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            })
        };
        Watch {
            stop,
            worst_probe,
            max_rss_kib,
            sms_saw_dead,
            threads: vec![probe, alive],
        }
    }

    fn finish(self) -> ((Duration, String), u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().unwrap();
        }
        let worst = self.worst_probe.lock().unwrap().clone();
        let rss = *self.max_rss_kib.lock().unwrap();
        let dead = self.sms_saw_dead.lock().unwrap().clone();
        (worst, rss, dead)
    }
}

#[test]
fn hostile_guests_and_modules_cost_the_node_only_their_own_budgets() {
    // A 150 KB notes file: each read grows the never-stopping history fast.
    let notes = format!("served alongside {}", "x".repeat(150_000));
    let c = cluster_opts(
        &notes,
        ClusterOptions {
            node_toml: "[guests]\nmax_running = 6\nfetch_timeout_ms = 2000\nmax_module_mb = 16\n",
            models: vec![(
                "never-stops",
                repo_file("tests/peers/model-never-stops.json"),
            )],
            ..Default::default()
        },
    );
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let guests = hostile_guests();
    for hostile in &guests {
        let path = c.modules.join(format!("{}.wat", hostile.id));
        std::fs::write(&path, wat(hostile.body)).unwrap();
        let (code, _, err) = register(&c, hostile.id, &path, &hostile.config, &[]);
        assert_eq!(code, 0, "{}: {err}", hostile.id);
    }

    // Hostile module sources, each in a place the node policy allows.
    let big = c.modules.join("big.wasm");
    std::fs::write(&big, vec![0u8; 17 << 20]).unwrap();
    let fifo = c.modules.join("fifo.wasm");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_uri = format!("http://{}/module.wasm", silent.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    {
        let held = held.clone();
        let silent = silent.try_clone().unwrap();
        std::thread::spawn(move || {
            for stream in silent.incoming().flatten() {
                // Read the request, answer nothing, keep the socket open.
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
                let _ = stream.read(&mut [0u8; 4096]);
                held.lock().unwrap().push(stream);
            }
        });
    }
    let fetches: [(&str, String, &str); 4] = [
        (
            "too-big",
            format!("file://{}", big.display()),
            "guests.max_module_mb",
        ),
        ("dev-zero", "file:///dev/zero".to_string(), "policy.modules"),
        (
            "fifo",
            format!("file://{}", fifo.display()),
            "not a regular file",
        ),
        ("silent-http", silent_uri, "guests.fetch_timeout_ms"),
    ];
    for (id, uri, _) in &fetches {
        let (code, _, err) = register(
            &c,
            id,
            Path::new(uri),
            &json!({}),
            &["--sha256", &"3".repeat(64)],
        );
        assert_eq!(code, 0, "{id}: {err}");
    }

    let pid = c.node.proc.pid().unwrap();
    let rss_before = rss_kib(pid);
    let watch = Watch::start(c.node.http.clone(), pid, c.sms.grpc.clone());
    let ids: Vec<String> = guests
        .iter()
        .map(|h| h.id.to_string())
        .chain(fetches.iter().map(|(id, _, _)| id.to_string()))
        .chain(["fs-agent".to_string()])
        .collect();
    let runs: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let sms = c.sms.grpc.clone();
            std::thread::spawn(move || {
                let (code, run, err, took) = invoke(&sms, &id);
                (id, code, run, err, took)
            })
        })
        .collect();
    let mut ended = Vec::new();
    for handle in runs {
        ended.push(handle.join().unwrap());
    }
    // The node serves a normal run afterwards too.
    let (code, after, err, _) = invoke(&c.sms.grpc, "fs-agent");
    let (worst, max_rss, sms_saw_dead) = watch.finish();

    for (id, code, run, err, took) in &ended {
        if let Some(h) = guests.iter().find(|h| h.id == id) {
            assert_eq!(*code, Some(1), "{id}: {run} {err}");
            assert!(run["exit_code"].is_null(), "{id}: {run}");
            let error = run["error"].as_str().unwrap_or_default();
            assert!(error.contains(h.reason), "{id}: {error}");
            let spent = if h.cpu {
                &run["cpu_ms"]
            } else {
                &run["duration_ms"]
            };
            let spent = spent.as_u64().unwrap();
            assert!(
                spent <= h.limit_ms + 1000,
                "{id} ended after {spent} ms, limit {} ms",
                h.limit_ms
            );
        } else if let Some((_, _, reason)) = fetches.iter().find(|(f, _, _)| f == id) {
            assert_ne!(*code, Some(0), "{id}");
            assert!(err.contains(reason), "{id}: {err}");
            // The caller's wait includes queueing for a slot behind the
            // hostile guests (2 s wall at most for the first to end).
            assert!(*took < Duration::from_secs(25), "{id} took {took:?}");
        } else {
            assert_eq!(*code, Some(0), "{id}: {run} {err}");
            assert!(
                run["stdout"].as_str().unwrap().contains("served alongside"),
                "{run}"
            );
        }
    }
    eprintln!(
        "sandbox figures: worst /status probe {:?}, node RSS {rss_before} KiB before, {max_rss} KiB at most",
        worst.0
    );
    assert_eq!(code, Some(0), "{after} {err}");
    assert!(
        worst.0 <= PROBE_BOUND,
        "a /status probe took {:?}: {}",
        worst.0,
        worst.1
    );
    assert!(
        sms_saw_dead.is_empty(),
        "SMS saw the node dead: {sms_saw_dead:?}"
    );
    assert!(
        max_rss <= RSS_BOUND_KIB,
        "node RSS reached {max_rss} KiB (from {rss_before} KiB); the bound is {RSS_BOUND_KIB} KiB"
    );
    drop(held);
}
