//! `sms tasks ...` and `sms invoke`: register guest modules and run them.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use sha2::{Digest, Sha256};
use spear_proto::v1::invocation_client::InvocationClient;
use spear_proto::v1::tasks_client::TasksClient;
use spear_proto::v1::{
    DeleteTaskRequest, GetTaskRequest, InvokeRequest, InvokeResponse, ListTasksRequest,
    RegisterTaskRequest, TaskSpec,
};

use spear_common::{safe_eprint, safe_eprintln, safe_print, safe_println};
use spear_identity::Identity;

use super::client::{connect, request, status_error};
use super::ClientArgs;

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Register (or replace) a task: a guest module and its config.
    Register {
        #[command(flatten)]
        client: ClientArgs,
        /// The task id.
        #[arg(long)]
        id: String,
        /// The module: a local .wasm path (sent as a file:// URI; nodes must
        /// see the same path) or a file:// / http(s):// URI.
        #[arg(long)]
        module: String,
        /// The module's sha256 [default: computed from a local file].
        #[arg(long)]
        sha256: Option<String>,
        /// The task config, a JSON file (see docs/tasks.md) [default: {}].
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List the registered tasks.
    List(ClientArgs),
    /// Show one task.
    Get {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
    },
    /// Remove a task.
    Delete {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
    },
}

pub async fn run(command: TasksCommand) -> Result<i32> {
    match command {
        TasksCommand::Register {
            client,
            id,
            module,
            sha256,
            config,
            description,
        } => {
            let (module_uri, digest) = module_uri_and_digest(&module, sha256)?;
            let kind = local_kind(&module_uri)?;
            let config_json = match config {
                Some(path) => std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read the task config {}", path.display()))?,
                None => "{}".to_string(),
            };
            let task = TaskSpec {
                id: id.clone(),
                module_uri,
                module_sha256: digest,
                config_json,
                description,
            };
            // Checked here too, so the operator sees the mistake before a round trip.
            spear_proto::task::check_task_spec(&task)?;
            let mut tasks =
                TasksClient::new(connect(&client, &client.addr, Identity::Sms, "SMS").await?);
            tasks
                .register_task(request(&client, RegisterTaskRequest { task: Some(task) })?)
                .await
                .map_err(status_error)?;
            match kind {
                Some(kind) => safe_println!("task {id} registered ({kind})"),
                None => safe_println!("task {id} registered"),
            }
            Ok(0)
        }
        TasksCommand::List(client) => {
            let mut tasks =
                TasksClient::new(connect(&client, &client.addr, Identity::Sms, "SMS").await?);
            let list = tasks
                .list_tasks(request(&client, ListTasksRequest {})?)
                .await
                .map_err(status_error)?
                .into_inner();
            if client.json {
                let json: Vec<_> = list.tasks.iter().map(task_json).collect();
                spear_common::terminal::print_json(&serde_json::to_string_pretty(&json)?);
            } else {
                safe_println!("{:<32} {:<14} MODULE", "ID", "SHA256");
                for t in &list.tasks {
                    safe_println!(
                        "{:<32} {:<14} {}",
                        t.id,
                        t.module_sha256.get(..12).unwrap_or(&t.module_sha256),
                        t.module_uri
                    );
                }
            }
            Ok(0)
        }
        TasksCommand::Get { client, id } => {
            let mut tasks =
                TasksClient::new(connect(&client, &client.addr, Identity::Sms, "SMS").await?);
            let task = tasks
                .get_task(request(&client, GetTaskRequest { id })?)
                .await
                .map_err(status_error)?
                .into_inner();
            spear_common::terminal::print_json(&serde_json::to_string_pretty(&task_json(&task))?);
            Ok(0)
        }
        TasksCommand::Delete { client, id } => {
            let mut tasks =
                TasksClient::new(connect(&client, &client.addr, Identity::Sms, "SMS").await?);
            tasks
                .delete_task(request(&client, DeleteTaskRequest { id: id.clone() })?)
                .await
                .map_err(status_error)?;
            safe_println!("task {id} deleted");
            Ok(0)
        }
    }
}

fn task_json(task: &TaskSpec) -> serde_json::Value {
    let config: serde_json::Value =
        serde_json::from_str(&task.config_json).unwrap_or(serde_json::Value::Null);
    serde_json::json!({
        "id": task.id, "module_uri": task.module_uri, "module_sha256": task.module_sha256,
        "description": task.description, "config": config,
    })
}

/// A local path becomes an absolute file:// URI with its digest computed; a
/// URI is taken as is (its digest computed when it is a readable file://).
fn module_uri_and_digest(module: &str, sha256: Option<String>) -> Result<(String, String)> {
    let local: Option<PathBuf> = if let Some(path) = module.strip_prefix("file://") {
        Some(PathBuf::from(path))
    } else if module.contains("://") {
        None
    } else {
        let path = Path::new(module);
        Some(
            path.canonicalize()
                .with_context(|| format!("cannot find the module {module}"))?,
        )
    };
    let uri = match &local {
        Some(path) => format!("file://{}", path.display()),
        None => module.to_string(),
    };
    let digest = match (sha256, &local) {
        (Some(sha), _) => sha.to_ascii_lowercase(),
        (None, Some(path)) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("cannot read the module {}", path.display()))?;
            hex::encode(Sha256::digest(&bytes))
        }
        (None, None) => bail!("--sha256 is needed for a module at {module} (sha256sum prints it)"),
    };
    Ok((uri, digest))
}

/// The most of a local module read to say what it is (a node takes at
/// most 64 MiB by default, guests.max_module_mb).
const MAX_INSPECTED: u64 = 256 << 20;

/// What the module at `uri` is, when it is a regular file here that can
/// be read (else the node, which fetches it, says what is wrong); a
/// component importing outside the agent world is refused.
fn local_kind(uri: &str) -> Result<Option<&'static str>> {
    let Some(path) = uri.strip_prefix("file://") else {
        return Ok(None);
    };
    // Looked at before it is opened: opening a FIFO would wait for a
    // writer.
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() <= MAX_INSPECTED => {}
        _ => return Ok(None),
    }
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_INSPECTED), &mut bytes)
        .is_err()
    {
        return Ok(None);
    }
    let kind =
        super::module_kind::kind(&bytes).with_context(|| format!("{path} cannot be registered"))?;
    Ok(Some(kind))
}

/// Where `sms invoke` sends the run, and for whom.
pub struct Target {
    /// Run on this node (empty: SMS picks).
    pub node: String,
    /// Skip SMS: this node's invocation address.
    pub node_addr: Option<String>,
    /// `--principal-token`: a `${NAME}` holding the person's token.
    pub principal_token: Option<String>,
}

/// The request, carrying the admin token if any and the principal's token
/// from the environment variable `reference` names.
fn principal_request<T>(
    client: &ClientArgs,
    body: T,
    reference: Option<&str>,
) -> Result<tonic::Request<T>> {
    let mut request = request(client, body)?;
    let Some(reference) = reference else {
        return Ok(request);
    };
    let name = spear_proto::refs::sole_reference(reference).with_context(|| {
        format!("--principal-token {reference} is not one ${{NAME}} reference; give the token in an environment variable")
    })?;
    let token = std::env::var(name)
        .ok()
        .filter(|t| !t.trim().is_empty())
        .with_context(|| format!("--principal-token: ${{{name}}} is not set in this shell"))?;
    let limit = spear_identity::oidc::MAX_TOKEN_BYTES;
    if token.trim().len() > limit {
        anyhow::bail!(
            "--principal-token: the token in ${{{name}}} is {} KiB, over the {} KiB SMS reads of a principal token; ask the identity provider for a smaller one (fewer claims, such as groups)",
            token.trim().len().div_ceil(1024),
            limit / 1024
        );
    }
    let value = tonic::metadata::MetadataValue::try_from(token.trim())
        .context("--principal-token: the token has characters a header cannot hold")?;
    request
        .metadata_mut()
        .insert(spear_identity::PRINCIPAL_TOKEN_HEADER, value);
    Ok(request)
}

/// `sms invoke`: through SMS, or straight to a node with `node_addr`.
pub async fn invoke(
    client: &ClientArgs,
    task_id: String,
    input: Option<String>,
    input_file: Option<PathBuf>,
    target: Target,
) -> Result<i32> {
    let Target {
        node,
        node_addr,
        principal_token,
    } = target;
    let input = match (input, input_file) {
        (Some(text), _) => text.into_bytes(),
        (None, Some(path)) if path == Path::new("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
            bytes
        }
        (None, Some(path)) => std::fs::read(&path)
            .with_context(|| format!("cannot read the input {}", path.display()))?,
        (None, None) => Vec::new(),
    };
    let body = InvokeRequest {
        task_id,
        input: input.into(),
        node_id: node,
        task: None,
        principal: None,
        delegation: Default::default(),
    };
    let response = match node_addr {
        Some(addr) => {
            // Straight to the node: as an admin by certificate, never with
            // the token (nodes do not take it).
            let expect = Identity::Node(body.node_id.clone());
            if client.tls_ca.is_some() && body.node_id.is_empty() {
                anyhow::bail!("with TLS, --node-addr needs --node <id>: the node's certificate is checked against it");
            }
            InvocationClient::new(connect(client, &addr, expect, "the node").await?)
                .max_decoding_message_size(spear_proto::defaults::MAX_INVOKE_RESPONSE_BYTES)
                .invoke(tonic::Request::new(body))
                .await
        }
        None => {
            let channel = connect(client, &client.addr, Identity::Sms, "SMS").await?;
            // Approvals the run waits for are named as SMS announces them.
            let waits = super::audit::announce_waits(
                client,
                channel.clone(),
                body.task_id.clone(),
                body.node_id.clone(),
            )
            .await;
            let answer = TasksClient::new(channel)
                .max_decoding_message_size(spear_proto::defaults::MAX_INVOKE_RESPONSE_BYTES)
                .invoke_task(principal_request(
                    client,
                    body,
                    principal_token.as_deref(),
                )?)
                .await;
            if let Some(waits) = waits {
                waits.abort();
            }
            answer
        }
    }
    .map_err(status_error)?
    .into_inner();
    print_response(&response, client.json)
}

/// A run's (or `sms usage`'s) usage as `--json` prints it: counts, and the
/// cost both in USD and exactly in nano-dollars.
pub(super) fn usage_json(used: spear_proto::v1::RunUsage) -> serde_json::Value {
    serde_json::json!({
        "model_requests": used.model_requests,
        "unpriced_model_requests": used.unpriced_model_requests,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "tool_calls": used.tool_calls,
        "cost_usd": used.cost_nano_usd as f64 / 1e9,
        "cost_nano_usd": used.cost_nano_usd,
    })
}

/// The guest's stdout on stdout; its stderr, the tool calls and how it ended
/// on stderr. The exit code is the guest's (1 when it was stopped).
fn print_response(response: &InvokeResponse, json: bool) -> Result<i32> {
    if json {
        let trace: Vec<_> = response.trace.iter().map(|t| serde_json::json!({
            "tool_call_id": t.tool_call_id, "name": t.name, "server_id": t.server_id, "tool": t.tool,
            "is_error": t.is_error, "duration_us": t.duration_us, "bytes": t.bytes,
            "refused": t.refused,
        })).collect();
        let out = serde_json::json!({
            "node_id": response.node_id, "task_id": response.task_id, "ok": response.ok,
            "exit_code": response.exit_code, "error": response.error,
            "stdout": String::from_utf8_lossy(&response.stdout),
            "stderr": String::from_utf8_lossy(&response.stderr),
            "trace": trace, "duration_ms": response.duration_ms, "cpu_ms": response.cpu_ms,
            "invocation_id": response.invocation_id, "stop_reason": response.stop_reason,
            "usage": usage_json(response.usage.unwrap_or_default()),
        });
        spear_common::terminal::print_json(&serde_json::to_string_pretty(&out)?);
    } else {
        // The guest's output carries what its model and tools said: shown
        // escaped like every other line (`--json` has its exact text).
        safe_print!("{}", String::from_utf8_lossy(&response.stdout));
        safe_eprint!("{}", String::from_utf8_lossy(&response.stderr));
        for t in &response.trace {
            let target = if !t.server_id.is_empty() {
                format!("{}/{}", t.server_id, t.tool)
            } else if !t.tool.is_empty() {
                format!("{} (a guest tool)", t.tool)
            } else if !t.refused.is_empty() {
                let why = spear_common::text::printable(&t.refused).into_owned();
                format!("{} (not executed: {why})", t.name)
            } else {
                format!("{} (not executed)", t.name)
            };
            safe_eprintln!(
                "tool call {target}: {} in {:.1} ms, {} bytes",
                if t.is_error { "error" } else { "ok" },
                t.duration_us as f64 / 1000.0,
                t.bytes
            );
        }
        let how = match (response.exit_code, response.error.as_str()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, error) if response.stop_reason == "quota" => {
                format!("stopped by a quota: {error}")
            }
            (None, error) => format!("stopped: {error}"),
        };
        safe_eprintln!(
            "task {} on node {}: {how} ({} ms)",
            response.task_id,
            response.node_id,
            response.duration_ms
        );
    }
    Ok(match response.exit_code {
        Some(code) => code.clamp(0, 255),
        None => 1,
    })
}
