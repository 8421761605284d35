//! Tasks: the registered tasks; register one (a module uploaded or named
//! by URI, and its config, checked by the same code as
//! `sms tasks register`); delete; invoke with an input and see the
//! output, the exit and the run's trace: each model request and tool
//! call as the node recorded it in the audit trail, with the rule that
//! allowed the call.

use std::collections::BTreeMap;

use axum::extract::{Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use maud::{html, Markup};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use spear_proto::audit::{Kind, Record};
use spear_proto::v1::{InvokeRequest, InvokeResponse, QueryAuditRequest, TaskSpec};

use super::super::guard::Signed;
use super::super::page::{self, enc};
use super::super::Shared;
use super::audit::{parse, table};
use super::{badge, notice_of, Failure, View};

/// The largest request the console reads: a module upload.
pub const MAX_UPLOAD: usize = 64 << 20;
/// Invocations the tasks page lists.
const RECENT: usize = 20;

#[derive(Debug, Default, Deserialize)]
pub struct Shown {
    #[serde(default)]
    notice: String,
    /// Show this invocation's trace.
    #[serde(default)]
    invocation: String,
}

/// One invocation as the audit trail tells it.
struct Invocation {
    id: String,
    task: String,
    node: String,
    started_ms: u64,
    tool_calls: usize,
    model_requests: usize,
    refused: usize,
}

/// The task's (or every task's) records, grouped by invocation, newest
/// first.
async fn invocations(state: &Shared, task: &str) -> Result<Vec<Invocation>, Failure> {
    let response = state
        .api
        .audit(QueryAuditRequest {
            task_id: task.to_string(),
            limit: 1000,
            ..Default::default()
        })
        .await?;
    let mut by_id: BTreeMap<String, Invocation> = BTreeMap::new();
    for record in parse(&response) {
        if record.invocation.is_empty() {
            continue;
        }
        let entry = by_id
            .entry(record.invocation.clone())
            .or_insert_with(|| Invocation {
                id: record.invocation.clone(),
                task: record.task.clone(),
                node: record.node.clone(),
                started_ms: record.time_ms,
                tool_calls: 0,
                model_requests: 0,
                refused: 0,
            });
        entry.started_ms = entry.started_ms.min(record.time_ms);
        match record.kind {
            Kind::ToolCall => entry.tool_calls += 1,
            Kind::ModelRequest => entry.model_requests += 1,
            _ => {}
        }
        if record.kind == Kind::ToolCall && record.outcome.name() != "run" {
            entry.refused += 1;
        }
    }
    let mut all: Vec<Invocation> = by_id.into_values().collect();
    all.sort_by(|a, b| b.started_ms.cmp(&a.started_ms));
    all.truncate(RECENT);
    Ok(all)
}

fn invocations_table(all: &[Invocation]) -> Markup {
    html! {
        table id="invocations" {
            thead { tr { th { "Started (UTC)" } th { "Task" } th { "Invocation" } th { "Node" } th class="num" { "Model requests" } th class="num" { "Tool calls" } th class="num" { "Not run" } } }
            tbody {
                @for i in all {
                    tr {
                        td { (page::time(i.started_ms)) }
                        td { a href={"/tasks/" (enc(&i.task))} { (i.task) } }
                        td class="mono" { a href={"/tasks/" (enc(&i.task)) "?invocation=" (enc(&i.id))} { (i.id) } }
                        td class="mono" { (i.node) }
                        td class="num" { (i.model_requests) }
                        td class="num" { (i.tool_calls) }
                        td class="num" { (i.refused) }
                    }
                }
            }
        }
    }
}

/// One invocation's records, oldest first.
async fn trace(state: &Shared, task: &str, invocation: &str) -> Result<Vec<Record>, Failure> {
    let response = state
        .api
        .audit(QueryAuditRequest {
            task_id: task.to_string(),
            limit: 1000,
            ..Default::default()
        })
        .await?;
    let mut records: Vec<Record> = parse(&response)
        .into_iter()
        .filter(|r| r.invocation == invocation)
        .collect();
    records.sort_by_key(|r| (r.time_ms, r.seq));
    Ok(records)
}

fn register_form(signed: &Signed, uploads: bool) -> Markup {
    html! {
        h2 { "Register a task" }
        form method="post" action="/tasks" enctype="multipart/form-data" class="stack" {
            (page::csrf(&signed.session))
            label for="task-id" { "Task id" }
            input id="task-id" type="text" name="id" required;
            @if uploads {
                label for="module-file" { "Module (.wasm) to upload" }
                input id="module-file" type="file" name="module" accept=".wasm,application/wasm";
                p class="muted" { "Or give a URI nodes fetch it from:" }
            } @else {
                p class="muted" { "Uploads need SMS's --module-dir (a directory nodes read); give the module's URI." }
            }
            label for="module-uri" { "Module URI (file:///… or https://…)" }
            input id="module-uri" type="text" name="module_uri";
            label for="module-sha" { "Module SHA-256 (computed for an upload)" }
            input id="module-sha" type="text" name="sha256";
            label for="task-config" { "Config (JSON, see docs/tasks.md)" }
            textarea id="task-config" name="config" { "{}" }
            label for="task-description" { "Description" }
            input id="task-description" type="text" name="description";
            p { button type="submit" class="primary" { "Register" } }
        }
    }
}

pub async fn list(
    State(state): State<Shared>,
    Extension(signed): Extension<Signed>,
    Query(shown): Query<Shown>,
) -> View {
    let tasks = state.api.tasks().await?;
    let recent = invocations(&state, "").await?;
    Ok(render_list(
        &state,
        &signed,
        &tasks,
        &recent,
        notice_of(&shown.notice),
    ))
}

fn render_list(
    state: &Shared,
    signed: &Signed,
    tasks: &[TaskSpec],
    recent: &[Invocation],
    notice: Option<Markup>,
) -> Markup {
    let body = html! {
        @if let Some(notice) = notice { (notice) }
        table id="tasks-table" {
            thead { tr { th { "Task" } th { "Module" } th { "SHA-256" } th { "Description" } } }
            tbody {
                @for task in tasks {
                    tr data-task=(task.id) {
                        td { a href={"/tasks/" (enc(&task.id))} { (task.id) } }
                        td class="mono" { (task.module_uri) }
                        td class="mono" { (task.module_sha256.get(..12).unwrap_or_default()) "…" }
                        td { (task.description) }
                    }
                }
            }
        }
        h2 { "Recent invocations" }
        (page::live("recent", "audit", invocations_table(recent)))
        @if signed.session.is_admin() { (register_form(signed, state.module_dir.is_some())) }
    };
    page::page("Tasks", "/tasks", "/tasks", &signed.session, body)
}

/// What the register form sent.
#[derive(Default)]
struct Registration {
    csrf: String,
    id: String,
    module: Option<Vec<u8>>,
    module_uri: String,
    sha256: String,
    config: String,
    description: String,
}

async fn read_form(mut form: Multipart) -> Result<Registration, Failure> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("the form could not be read: {e}"),
        )
    };
    let mut out = Registration::default();
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_string();
        if name == "module" {
            let bytes = field.bytes().await.map_err(bad)?;
            if !bytes.is_empty() {
                out.module = Some(bytes.to_vec());
            }
            continue;
        }
        let text = field.text().await.map_err(bad)?;
        match name.as_str() {
            "csrf" => out.csrf = text,
            "id" => out.id = text.trim().to_string(),
            "module_uri" => out.module_uri = text.trim().to_string(),
            "sha256" => out.sha256 = text.trim().to_lowercase(),
            "config" => out.config = text,
            "description" => out.description = text,
            _ => {}
        }
    }
    Ok(out)
}

/// Writes an uploaded module into the module directory under its digest
/// (write, then rename: a node never reads half a module); its URI.
fn store_module(dir: &std::path::Path, bytes: &[u8], sha: &str) -> Result<String, Failure> {
    let path = dir.join(format!("{sha}.wasm"));
    let tmp = dir.join(format!(".{sha}.wasm.tmp"));
    let failed = |e: std::io::Error| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "cannot write the module into {}: {e}; check SMS's --module-dir",
                dir.display()
            ),
        )
    };
    std::fs::write(&tmp, bytes).map_err(failed)?;
    std::fs::rename(&tmp, &path).map_err(failed)?;
    Ok(format!("file://{}", path.display()))
}

pub async fn register(
    State(state): State<Shared>,
    Extension(signed): Extension<Signed>,
    form: Multipart,
) -> Result<Response, Failure> {
    let form = read_form(form).await?;
    signed.session.may_write(&form.csrf)?;
    let (module_uri, sha256) = match (&form.module, &state.module_dir) {
        (Some(bytes), Some(dir)) => {
            let sha = hex::encode(Sha256::digest(bytes));
            if !form.sha256.is_empty() && form.sha256 != sha {
                return Err(Failure::new(
                    StatusCode::BAD_REQUEST,
                    format!("the uploaded module's SHA-256 is {sha}, not the {} given; upload the right file or clear the field", form.sha256),
                ));
            }
            (store_module(dir, bytes, &sha)?, sha)
        }
        (Some(_), None) => {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "this SMS takes no uploads (no --module-dir); give the module's URI and SHA-256",
            ))
        }
        (None, _) => (form.module_uri.clone(), form.sha256.clone()),
    };
    let config = if form.config.trim().is_empty() {
        "{}".to_string()
    } else {
        form.config.clone()
    };
    state
        .api
        .register_task(TaskSpec {
            id: form.id.clone(),
            module_uri,
            module_sha256: sha256,
            config_json: config,
            description: form.description.clone(),
        })
        .await?;
    Ok(Redirect::to(&format!("/tasks/{}?notice=registered", enc(&form.id))).into_response())
}

#[derive(Deserialize)]
pub struct Write {
    #[serde(default)]
    csrf: String,
}

pub async fn delete(
    State(state): State<Shared>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    Form(form): Form<Write>,
) -> Result<Response, Failure> {
    signed.session.may_write(&form.csrf)?;
    state.api.delete_task(&id).await?;
    Ok(Redirect::to("/tasks?notice=deleted").into_response())
}

fn task_page(
    signed: &Signed,
    task: &TaskSpec,
    notice: Option<Markup>,
    result: Option<&InvokeResponse>,
    invocation: &str,
    records: &[Record],
) -> Markup {
    let config = serde_json::from_str::<serde_json::Value>(&task.config_json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| task.config_json.clone());
    let src = if invocation.is_empty() {
        format!("/tasks/{}", enc(&task.id))
    } else {
        format!("/tasks/{}?invocation={}", enc(&task.id), enc(invocation))
    };
    let body = html! {
        @if let Some(notice) = notice { (notice) }
        table class="facts" {
            tr { th { "Module" } td class="mono" { (task.module_uri) } }
            tr { th { "SHA-256" } td class="mono" { (task.module_sha256) } }
            tr { th { "Description" } td { (task.description) } }
        }
        details { summary { "Config" } pre { (config) } }
        @if signed.session.is_admin() {
            h2 { "Invoke" }
            form method="post" action={"/tasks/" (enc(&task.id)) "/invoke"} class="stack" {
                (page::csrf(&signed.session))
                label for="invoke-input" { "Input (the guest's standard input)" }
                textarea id="invoke-input" name="input" {}
                label for="invoke-node" { "Node (empty: SMS picks one)" }
                input id="invoke-node" type="text" name="node";
                p { button type="submit" class="primary" id="invoke" { "Invoke" } }
            }
        }
        @if let Some(result) = result {
            h2 { "Result" }
            p id="run-result" {
                @if result.ok { (badge("ok")) } @else { (badge("failed")) }
                " exit " @match result.exit_code { Some(code) => { (code) } None => { "none" } }
                " on " span class="mono" { (result.node_id) } " in " (result.duration_ms) " ms, CPU " (result.cpu_ms) " ms"
                @if !result.error.is_empty() { " — " (result.error) }
            }
            h3 { "Output" }
            pre id="run-stdout" { (String::from_utf8_lossy(&result.stdout)) }
            @if !result.stderr.is_empty() {
                h3 { "Standard error" }
                pre id="run-stderr" { (String::from_utf8_lossy(&result.stderr)) }
            }
            h3 { "Tool calls (as the node answered)" }
            table id="run-calls" {
                thead { tr { th { "Name" } th { "Server" } th { "Tool" } th { "Error" } th class="num" { "µs" } th class="num" { "Bytes" } } }
                tbody {
                    @for call in &result.trace {
                        tr { td class="mono" { (call.name) } td class="mono" { (call.server_id) } td class="mono" { (call.tool) } td { (call.is_error) } td class="num" { (call.duration_us) } td class="num" { (call.bytes) } }
                    }
                }
            }
        }
        @if !invocation.is_empty() {
            h2 { "Trace of " span class="mono" { (invocation) } }
            p class="muted" { "Each model request and tool call as the node recorded it, with the rule that decided the call. Records reach SMS within a moment of being written; this updates itself." }
            (page::live("trace", "audit", table("trace-table", records)))
        }
        @if signed.session.is_admin() {
            h2 { "Delete" }
            form method="post" action={"/tasks/" (enc(&task.id)) "/delete"} data-confirm={"Delete task " (task.id) "?"} {
                (page::csrf(&signed.session))
                button type="submit" class="danger" { "Delete this task" }
            }
        }
    };
    page::page(
        &format!("Task {}", task.id),
        "/tasks",
        &src,
        &signed.session,
        body,
    )
}

pub async fn task(
    State(state): State<Shared>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    Query(shown): Query<Shown>,
) -> View {
    let task = state.api.task(&id).await?;
    let records = if shown.invocation.is_empty() {
        Vec::new()
    } else {
        trace(&state, &id, &shown.invocation).await?
    };
    Ok(task_page(
        &signed,
        &task,
        notice_of(&shown.notice),
        None,
        &shown.invocation,
        &records,
    ))
}

#[derive(Deserialize)]
pub struct Invoke {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    input: String,
    #[serde(default)]
    node: String,
}

pub async fn invoke(
    State(state): State<Shared>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    Form(form): Form<Invoke>,
) -> View {
    signed.session.may_write(&form.csrf)?;
    let task = state.api.task(&id).await?;
    let result = state
        .api
        .invoke(InvokeRequest {
            task_id: id.clone(),
            input: form.input.into_bytes().into(),
            node_id: form.node.trim().to_string(),
            task: None,
        })
        .await?;
    let records = trace(&state, &id, &result.invocation_id).await?;
    Ok(task_page(
        &signed,
        &task,
        None,
        Some(&result),
        &result.invocation_id,
        &records,
    ))
}
