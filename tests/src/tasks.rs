//! A small Spear installation for the task tests: SMS serving the real
//! filesystem MCP server, one spearlet whose model is `replay-llm` (the OpenAI
//! wire format) replaying `examples/replay/fs-agent.json`, a notes file for
//! the agent to read, and the `sms` CLI verbs to register and invoke tasks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::certs::Certs;
use crate::etcd::EtcdServer;
use crate::peers::npm_bin;
use crate::procs::{bin, Proc, SmsOptions, SmsProc, SpearletProc};
use crate::wait::eventually;

pub fn guest(name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            bin("sms")
                .parent()
                .and_then(Path::parent)
                .unwrap()
                .to_path_buf()
        });
    let path = target.join(format!("wasm32-wasip1/debug/examples/{name}.wasm"));
    assert!(
        path.exists(),
        "{}: build the example guests: cargo build --target wasm32-wasip1 -p spear-guest --examples (scripts/test.sh does)",
        path.display()
    );
    path
}

pub fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

pub struct Cluster {
    pub sms: SmsProc,
    pub node: SpearletProc,
    pub _models: Vec<Proc>,
    pub files: PathBuf,
    /// Where a test puts modules of its own (the node policy allows it).
    pub modules: PathBuf,
    pub work: tempfile::TempDir,
}

/// How a test cluster differs from the plain one.
#[derive(Default)]
pub struct ClusterOptions<'a> {
    pub token: Option<&'a str>,
    pub etcd: Option<&'a EtcdServer>,
    /// Mutual TLS everywhere: SMS and node-a get certificates from this
    /// CA, and [`SmsProc::client`] dials as `admin/ops`.
    pub certs: Option<&'a Certs>,
    /// More of the node's TOML, after the generated backends and policy
    /// (its own `[guests]` table, say).
    pub node_toml: &'a str,
    /// More backends, each a replay-llm of this recording: (name, file).
    pub models: Vec<(&'a str, PathBuf)>,
    /// The node's `policy.egress` lists nothing, as by default: loopback
    /// MCP servers and module URLs are refused. (Otherwise it lists
    /// 127.0.0.0/8, where the tests' peers listen.)
    pub no_egress: bool,
    /// The console's sign-in: SMS gets [`CONSOLE_TOKEN`] as its admin
    /// token (the CLI presents it too), [`VIEWER_TOKEN`] as its viewer
    /// token, and [`Cluster::modules`] as its module dir.
    pub console: bool,
    /// More `sms serve` arguments.
    pub sms_args: Vec<String>,
    /// The console's port; `None`: any free one.
    pub console_port: Option<u16>,
}

/// The admin token of a cluster with [`ClusterOptions::console`].
pub const CONSOLE_TOKEN: &str = "console-admin-token-0123456789";
/// Its viewer token.
pub const VIEWER_TOKEN: &str = "console-viewer-token-0123456789";

/// SMS with the filesystem server, one node whose default backend is the
/// replay model, and a notes file for the agent to read.
pub fn cluster(notes: &str) -> Cluster {
    cluster_opts(notes, ClusterOptions::default())
}

pub fn cluster_with_token(notes: &str, token: Option<&str>) -> Cluster {
    cluster_opts(
        notes,
        ClusterOptions {
            token,
            ..Default::default()
        },
    )
}

/// [`cluster`] behind mutual TLS: SMS and node-a with certificates from
/// `certs`, [`SmsProc::client`] as `admin/ops`, and the `fs-agent` task
/// registered. Also returns node-a's Invocation address.
pub fn tls_cluster_with_task(notes: &str, certs: &Certs) -> (Cluster, String) {
    let c = cluster_opts(
        notes,
        ClusterOptions {
            certs: Some(certs),
            ..Default::default()
        },
    );
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let node_addr = c.sms.status()["nodes"][0]["invoke_addr"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !node_addr.is_empty(),
        "node-a advertises no Invocation address"
    );
    (c, node_addr)
}

/// [`cluster`] with an admin token and SMS on etcd.
pub fn cluster_with(notes: &str, token: Option<&str>, etcd: Option<&EtcdServer>) -> Cluster {
    cluster_opts(
        notes,
        ClusterOptions {
            token,
            etcd,
            ..Default::default()
        },
    )
}

/// A replay-llm of `recording` serving the files in `files`; its base URL.
fn replay_model(work: &Path, name: &str, recording: &Path, files: &Path) -> (Proc, String) {
    replay_model_on(work, name, recording, files, "127.0.0.1:0")
}

/// A replay-llm of `recording` serving the files in `files`, listening on
/// `listen`; its process and base URL.
pub fn replay_model_on(
    work: &Path,
    name: &str,
    recording: &Path,
    files: &Path,
    listen: &str,
) -> (Proc, String) {
    replay_model_with(work, name, recording, files, listen, &[])
}

/// [`replay_model_on`] with more `replay-llm` arguments (`--log-requests`).
pub fn replay_model_with(
    work: &Path,
    name: &str,
    recording: &Path,
    files: &Path,
    listen: &str,
    extra: &[&str],
) -> (Proc, String) {
    let ready = work.join(format!("{name}.ready"));
    let mut cmd = Command::new(bin("replay-llm"));
    cmd.args(extra)
        .arg("--recording")
        .arg(recording)
        .arg("--listen")
        .arg(listen)
        .arg("--ready-file")
        .arg(&ready)
        .env("SPEAR_DEMO_FILES", files);
    let mut model = Proc::spawn("replay-llm", cmd, work.join(format!("{name}.log")));
    let url = eventually("replay-llm to listen", Duration::from_secs(20), || {
        if !model.is_running() {
            panic!("replay-llm exited:\n{}", model.log());
        }
        match std::fs::read_to_string(&ready) {
            Ok(url) if url.starts_with("http") => Ok(url),
            Ok(partial) => Err(format!("ready file holds '{partial}'")),
            Err(e) => Err(e.to_string()),
        }
    });
    (model, url)
}

/// Where the example guests are built: modules tests register come from
/// there or from the test's own work dir.
fn guest_dir() -> PathBuf {
    guest("fs-agent")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The cluster; see [`ClusterOptions`]. The node's policy lets tasks use
/// modules from the example guests' build dir, [`Cluster::modules`] and any
/// loopback HTTP server, read `SPEAR_TEST_GUEST_*` variables and be granted
/// the files dir (writable).
pub fn cluster_opts(notes: &str, options: ClusterOptions<'_>) -> Cluster {
    let ClusterOptions {
        token,
        etcd,
        certs,
        node_toml,
        models,
        no_egress,
        console,
        sms_args,
        console_port,
    } = options;
    let egress = if no_egress {
        ""
    } else {
        "egress = [\"127.0.0.0/8\"]\n"
    };
    let work = tempfile::tempdir().unwrap();
    let files = work.path().join("files").canonicalize_or_create();
    std::fs::write(files.join("notes.txt"), notes).unwrap();
    let mcp_dir = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp_dir).unwrap();
    let fs = json!({"mcpServers": {"fs": {
        "command": npm_bin("mcp-server-filesystem"), "args": [files],
        "allowed_tools": ["read_*", "list_*"],
    }}});
    std::fs::write(mcp_dir.join("fs.json"), fs.to_string()).unwrap();

    let recording = repo_file("examples/replay/fs-agent.json");
    let (model, url) = replay_model(work.path(), "model", &recording, &files);
    let mut procs = vec![model];
    let mut backends = String::new();
    for (name, recording) in models {
        let (model, url) = replay_model(work.path(), name, &recording, &files);
        procs.push(model);
        backends.push_str(&format!(
            "[llm.backends.{name}]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"recorded\"\n\n"
        ));
    }
    let modules = work.path().join("modules").canonicalize_or_create();
    let config = work.path().join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\ndefault = \"replay\"\n\n\
             [llm.backends.replay]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"recorded\"\napi_key_env = \"SPEAR_TEST_MODEL_KEY\"\n\n\
             [llm.backends.replay-stream]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"recorded\"\nstream = true\n\n\
             {backends}\
             [policy]\nenv = [\"SPEAR_TEST_GUEST_*\"]\nmodules = [\"file://{guests}/\", \"file://{modules}/\", \"http://127.0.0.1:*/\"]\n{egress}\n\
             [[policy.dirs]]\npath = \"{files}\"\nwritable = true\n\n{node_toml}",
            guests = guest_dir().display(),
            modules = modules.display(),
            files = files.display(),
        ),
    )
    .unwrap();

    let mut extra = sms_args;
    if console {
        let viewer = work.path().join("viewer-token");
        std::fs::write(&viewer, VIEWER_TOKEN).unwrap();
        extra.extend([
            "--viewer-token-file".to_string(),
            viewer.display().to_string(),
            "--module-dir".to_string(),
            modules.display().to_string(),
        ]);
    }
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(mcp_dir),
        admin_token: token
            .map(str::to_string)
            .or(console.then(|| CONSOLE_TOKEN.to_string())),
        client_presents_token: console,
        extra,
        etcd: etcd.map(EtcdServer::endpoint),
        tls: certs.map(Certs::sms),
        client_tls: certs.map(|c| c.admin("ops")),
        console_port,
        ..Default::default()
    });
    std::env::set_var("SPEAR_TEST_MODEL_KEY", "sk-test-never-logged");
    std::env::set_var("SPEAR_TEST_GUEST_TOKEN", "guest-token-granted");
    let mut args = vec!["--config".to_string(), config.display().to_string()];
    if let Some(certs) = certs {
        args.extend(certs.node("node-a").args());
    }
    let node = SpearletProc::start_with("node-a", &sms.grpc, &work.path().join("node-a"), &args);
    // SMS can route once it has the node's heartbeat with its address.
    eventually("node to be invocable", Duration::from_secs(30), || {
        let status = sms.status();
        let ready = status["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["node_id"] == "node-a" && n["alive"] == true && n["invoke_addr"] != "");
        if ready {
            Ok(())
        } else {
            Err(status.to_string())
        }
    });
    Cluster {
        sms,
        node,
        _models: procs,
        files,
        modules,
        work,
    }
}

trait CreateDir {
    fn canonicalize_or_create(self) -> PathBuf;
}

impl CreateDir for PathBuf {
    fn canonicalize_or_create(self) -> PathBuf {
        std::fs::create_dir_all(&self).unwrap();
        self.canonicalize().unwrap()
    }
}

pub fn register(
    c: &Cluster,
    id: &str,
    module: &Path,
    config: &Value,
    extra: &[&str],
) -> (i32, String, String) {
    register_at(&c.sms, c.work.path(), id, module, config, extra)
}

/// `sms tasks register` at `sms`, the config written to a file in `work`.
pub fn register_at(
    sms: &SmsProc,
    work: &Path,
    id: &str,
    module: &Path,
    config: &Value,
    extra: &[&str],
) -> (i32, String, String) {
    let config_file = work.join(format!("{id}.json"));
    std::fs::write(&config_file, config.to_string()).unwrap();
    let module = module.display().to_string();
    let config_file = config_file.display().to_string();
    let mut args = vec![
        "tasks",
        "register",
        "--id",
        id,
        "--module",
        &module,
        "--config",
        &config_file,
    ];
    args.extend_from_slice(extra);
    sms.client(&args)
}

pub fn invoke_json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = vec!["invoke", "--json"];
    all.extend_from_slice(args);
    let (code, out, err) = c.sms.client(&all);
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("exit {code}: {e}\nstdout: {out}\nstderr: {err}"))
}

/// A task on the filesystem server whose model is the `once` backend
/// ([`calling_once`]), with `quota` as its config's `"quota"`.
pub fn quota_task(quota: Value) -> Value {
    json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
           "llm": {"backend": "once"},
           "limits": {"wall_ms": 60000},
           "quota": quota})
}

/// The node TOML that prices the replayed model (for cost quotas).
pub const PRICED_MODEL: &str = "[llm.prices.\"recorded\"]\ninput = 3.0\noutput = 15.0\n";

pub fn fs_task() -> Value {
    json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
           "limits": {"wall_ms": 60000}})
}

/// Python's `http.server` on loopback serving `dir` (a web server for
/// modules); its process and port, once it accepts connections.
pub fn serve_dir(c: &Cluster, dir: &Path) -> (Proc, u16) {
    let port = crate::wait::free_port();
    let mut cmd = Command::new("python3");
    cmd.args([
        "-m",
        "http.server",
        "--bind",
        "127.0.0.1",
        &port.to_string(),
        "--directory",
    ])
    .arg(dir);
    let server = Proc::spawn("http.server", cmd, c.work.path().join("web.log"));
    eventually("the module server", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    (server, port)
}

/// A file's sha256 in hex, as an operator computes it (`sha256sum`).
pub fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("sha256sum: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A second node, node-b, with the cluster's node config; returns once SMS
/// can route to both.
pub fn second_node(c: &Cluster) -> SpearletProc {
    let config = c.work.path().join("node.toml").display().to_string();
    let b = SpearletProc::start_with(
        "node-b",
        &c.sms.grpc,
        &c.work.path().join("node-b"),
        &["--config".into(), config],
    );
    wait_invocable(&c.sms, 2);
    b
}

/// A recording whose model calls `tool` of server `server` once, then says
/// "the server said: " and what it returned.
pub fn calling_once(dir: &Path, server: &str, tool: &str) -> PathBuf {
    let path = dir.join("model.json");
    let turns = json!({"turns": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": spearlet::tools::offered_name(server, tool), "arguments": "{}"}}]},
        {"role": "assistant", "content": "the server said: {{last_tool_result}}"},
    ]});
    std::fs::write(&path, turns.to_string()).unwrap();
    path
}

/// Waits until `count` nodes are alive and invocable at `sms`.
pub fn wait_invocable(sms: &SmsProc, count: usize) {
    eventually(
        &format!("{count} nodes to be invocable"),
        Duration::from_secs(30),
        || {
            let status = sms.status();
            let alive = status["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["alive"] == true && n["invoke_addr"] != "")
                .count();
            (alive == count).then_some(()).ok_or(status.to_string())
        },
    );
}
