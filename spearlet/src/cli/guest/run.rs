//! `spearlet guest run MODULE --mcp-dir DIR`: one run of an agent as a
//! node would make it, with no SMS: the servers of `--mcp-dir` (read as
//! SMS reads them, `spear-server-files`) started in their sandboxes, the
//! task's policy, limits and grants checked by the node's own invoker
//! ([`crate::invoke::Invoker`], the request carrying its task), the guest
//! in its sandbox. What it prints: the guest's output, each tool call and
//! how the run ended.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use spear_common::{safe_eprintln, safe_println};
use spear_proto::v1::{InvokeRequest, InvokeResponse, Principal, TaskSpec};

use crate::config::NodeFile;
use crate::connections::Connections;
use crate::invoke::{FetchLimits, Invoker, InvokerDeps, LimitPolicy, ModuleStore};
use crate::llm::Backends;
use crate::node_policy::{NodePolicy, PolicyCell};
use crate::registry::{RegistryHandle, RegistryView};
use crate::sms_link::SmsLink;
use crate::tools::Router;

/// `spearlet guest run`'s flags.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The module or component (`spearlet guest build` makes one).
    pub module: PathBuf,
    /// A directory of MCP server files, as SMS's --mcp-dir.
    #[arg(long)]
    pub mcp_dir: PathBuf,
    /// The task's config (JSON, as for `sms tasks register --config`)
    /// [default: every server of --mcp-dir allowed and on].
    #[arg(long)]
    pub task_config: Option<PathBuf>,
    /// The run's input (its stdin, or a component's `run` input).
    #[arg(long, default_value = "")]
    pub input: String,
    /// A recorded conversation to replay as the model (replay-llm),
    /// instead of the endpoint in OPENAI_BASE_URL.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// A node TOML (its [llm] backends, [guests] and [policy]) instead
    /// of the model from the environment.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print the node's JSON answer instead.
    #[arg(long)]
    pub json: bool,
}

/// Runs the module once; the exit code is the guest's (1 when it was
/// stopped).
pub async fn run(args: RunArgs) -> Result<i32> {
    let work = tempfile::tempdir()?;
    let module = std::fs::canonicalize(&args.module)
        .with_context(|| format!("module {}", args.module.display()))?;
    let bytes = std::fs::read(&module).with_context(|| format!("module {}", module.display()))?;
    let sha256 = crate::wasm::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let replay = match &args.replay {
        Some(recording) => Some(super::replay::start(recording, work.path())?),
        None => None,
    };
    let file = node_file(
        args.config.as_deref(),
        replay.as_ref().map(|r| r.url.as_str()),
        &module,
    )?;
    let specs = crate::cli::mcp_dir::read(&args.mcp_dir)?.servers;
    let config = task_config(args.task_config.as_deref(), &specs)?;
    let registry = RegistryHandle::new(RegistryView::from_specs(specs));
    let state_dir = work.path().join("node");
    std::fs::create_dir_all(&state_dir)?;
    let policy = PolicyCell::new(NodePolicy::build(
        &file.policy,
        &state_dir,
        Backends::key_vars(&file.llm),
    )?);
    let options = crate::mcp::SessionOptions {
        sandbox: Some(crate::sandbox::Sandboxing::for_operator(Some(&state_dir))),
        ..Default::default()
    };
    let lookup: crate::connections::Lookup = Arc::new(|name: &str| Ok(std::env::var(name).ok()));
    let connections = Connections::with_options(registry.clone(), lookup, options);
    let invoker = invoker(
        &file,
        &state_dir,
        policy,
        Router::new(connections.clone(), registry),
    )?;
    let request = InvokeRequest {
        task_id: "local".into(),
        input: args.input.into_bytes().into(),
        task: Some(TaskSpec {
            id: "local".into(),
            module_uri: format!("file://{}", module.display()),
            module_sha256: sha256,
            config_json: config.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let answer = invoker
        .invoke(request, None, "local", Principal::default())
        .await;
    connections.shutdown().await;
    drop(replay);
    let response = answer.map_err(|e| anyhow::anyhow!("{e}"))?;
    report(&response, args.json)?;
    Ok(response.exit_code.unwrap_or(1))
}

/// The node TOML: `--config`'s, else one backend from the environment
/// (or the replay); modules may come from the module's own directory.
fn node_file(config: Option<&Path>, replay: Option<&str>, module: &Path) -> Result<NodeFile> {
    let mut file = match config {
        Some(path) => NodeFile::load(path)?,
        None => NodeFile::parse(&backend_toml(replay)?)?,
    };
    let dir = module.parent().unwrap_or(Path::new("/"));
    let root = format!("file://{}/", dir.display());
    file.policy.modules.get_or_insert_with(Vec::new).push(root);
    Ok(file)
}

fn backend_toml(replay: Option<&str>) -> Result<String> {
    let quoted = |s: &str| Value::String(s.to_string()).to_string();
    if let Some(url) = replay {
        return Ok(format!(
            "[llm.backends.replay]\nkind = \"openai\"\nbase_url = {}\nmodel = \"recorded\"\n",
            quoted(url)
        ));
    }
    let Ok(url) = std::env::var("OPENAI_BASE_URL") else {
        bail!("no model: set OPENAI_BASE_URL (an OpenAI-compatible endpoint, with OPENAI_API_KEY and OPENAI_MODEL when needed), or give --replay RECORDING or --config node.toml");
    };
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let key = if std::env::var_os("OPENAI_API_KEY").is_some() {
        "api_key_env = \"OPENAI_API_KEY\"\n"
    } else {
        ""
    };
    Ok(format!(
        "[llm.backends.openai]\nkind = \"openai\"\nbase_url = {}\nmodel = {}\n{key}",
        quoted(&url),
        quoted(&model)
    ))
}

/// `--task-config`'s JSON, else every server allowed and on.
fn task_config(path: Option<&Path>, specs: &[spear_proto::v1::ServerSpec]) -> Result<Value> {
    if let Some(path) = path {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --task-config {}", path.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("--task-config {} is not JSON", path.display()));
    }
    let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
    Ok(json!({"mcp": {"enabled": true, "allowed_server_ids": ids, "default_server_ids": ids}}))
}

/// The node's invoker over `router`, as `node/guests.rs` makes it.
fn invoker(
    file: &NodeFile,
    state_dir: &Path,
    policy: PolicyCell,
    router: Router,
) -> Result<Invoker> {
    let guests = &file.guests;
    let backends = Backends::new(file.llm.clone(), |name| std::env::var(name).ok())?;
    let fetch = FetchLimits {
        max_bytes: guests.max_module_mb << 20,
        timeout: std::time::Duration::from_millis(guests.fetch_timeout_ms),
    };
    let modules = ModuleStore::new(state_dir.join("modules"), policy.clone(), fetch)?;
    // Compiled modules outlive the run (a component's compile takes
    // seconds), in the same signed cache a node keeps.
    let compiled = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache/spear/guest-run"))
        .unwrap_or_else(|| state_dir.join("compiled"));
    let runtime = crate::invoke::runtime(Some(compiled), guests.threads)
        .map_err(|e| anyhow::anyhow!("cannot start the guest runtime: {e}"))?;
    Ok(Invoker::new(InvokerDeps {
        node_id: "local".into(),
        runtime: Arc::new(runtime),
        router,
        backends: Arc::new(backends),
        modules,
        policy,
        limits: LimitPolicy::new(guests.limits.clone()),
        sms: SmsLink::new(Vec::new(), None, Default::default()),
        max_running: 1,
        compile_timeout: std::time::Duration::from_millis(guests.compile_timeout_ms),
    }))
}

/// The guest's output (escaped), its calls and how it ended.
fn report(response: &InvokeResponse, json: bool) -> Result<()> {
    if json {
        let trace: Vec<Value> = response
            .trace
            .iter()
            .map(|t| json!({"name": t.name, "server": t.server_id, "tool": t.tool, "is_error": t.is_error, "refused": t.refused}))
            .collect();
        let answer = json!({
            "ok": response.ok, "exit_code": response.exit_code, "error": response.error,
            "stdout": String::from_utf8_lossy(&response.stdout),
            "stderr": String::from_utf8_lossy(&response.stderr),
            "trace": trace, "stop_reason": response.stop_reason,
            "duration_ms": response.duration_ms,
        });
        spear_common::terminal::print_json(&serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let text = |bytes: &[u8]| {
        spear_common::text::printable_lines(&String::from_utf8_lossy(bytes)).into_owned()
    };
    safe_println!("{}", text(&response.stdout).trim_end());
    let stderr = text(&response.stderr);
    if !stderr.trim().is_empty() {
        safe_eprintln!("{}", stderr.trim_end());
    }
    for call in &response.trace {
        let target = if call.server_id.is_empty() {
            format!("guest tool {}", call.tool)
        } else {
            format!("{}/{}", call.server_id, call.tool)
        };
        let outcome = match (call.is_error, call.refused.is_empty()) {
            (_, false) => format!("refused: {}", call.refused),
            (true, true) => "error".to_string(),
            (false, true) => "ok".to_string(),
        };
        safe_eprintln!("tool call: {target} ({outcome})");
    }
    let ended = match (response.exit_code, response.error.is_empty()) {
        (Some(code), _) => format!("exited {code}"),
        (None, false) => format!("stopped: {}", response.error),
        (None, true) => format!("stopped ({})", response.stop_reason),
    };
    safe_eprintln!("run ended: {ended} after {} ms", response.duration_ms);
    Ok(())
}
