//! A task's page: its spec, the invoke form, a run's output and exit, and
//! its trace (the run's audit records, filled in live as they reach SMS).

use axum::extract::{Path, Query};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use spear_proto::audit::Record;
use spear_proto::v1::{InvokeRequest, InvokeResponse, TaskSpec};

use super::Shown;
use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc};
use crate::console::views::audit::table;
use crate::console::views::{badge, notice_of, Failure, View};
use crate::console::Shared;

/// One invocation's records, oldest first; a person sees only their own.
async fn trace(
    state: &Shared,
    task: &str,
    invocation: &str,
    signed: &Signed,
) -> Result<Vec<Record>, Failure> {
    let own = signed.session.person.as_ref().map(|p| p.principal.label());
    let mut records: Vec<Record> = super::task_records(state, task)
        .await?
        .into_iter()
        .filter(|r| r.invocation == invocation)
        .filter(|r| own.as_ref().is_none_or(|own| &r.principal == own))
        .collect();
    records.sort_by_key(|r| (r.time_ms, r.seq));
    Ok(records)
}

/// A person's answer for a task that does not list them.
fn not_listed(principal: &spear_proto::v1::Principal, task: &str) -> Failure {
    Failure::new(
        axum::http::StatusCode::FORBIDDEN,
        format!(
            "{} may not invoke task '{task}': the task's \"invokers\" do not list them",
            principal.label()
        ),
    )
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
        @if signed.session.is_admin() || signed.session.is_person() {
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
    let title = format!("Task {}", task.id);
    page::page(&title, "/tasks", &src, &signed.session, body)
}

pub async fn task(
    Visit { state, signed }: Visit,
    Path(id): Path<String>,
    Query(shown): Query<Shown>,
) -> View {
    let task = state.api.task(&id).await?;
    if let Some(person) = &signed.session.person {
        if !super::may_invoke(&person.principal, &task) {
            return Err(not_listed(&person.principal, &id));
        }
    }
    let records = if shown.invocation.is_empty() {
        Vec::new()
    } else {
        trace(&state, &id, &shown.invocation, &signed).await?
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
    Visit { state, signed }: Visit,
    Path(id): Path<String>,
    Form(form): Form<Invoke>,
) -> View {
    signed.session.may_invoke(&form.csrf)?;
    let task = state.api.task(&id).await?;
    let request = InvokeRequest {
        task_id: id.clone(),
        input: form.input.into_bytes().into(),
        node_id: form.node.trim().to_string(),
        task: None,
        principal: None,
        delegation: Default::default(),
    };
    // A person's run is theirs: SMS verifies their token and the task's
    // "invokers", and delegates to the node as for any person's call.
    let result = match &signed.session.person {
        Some(person) => state.api.invoke_as(request, &person.token).await?,
        None => state.api.invoke(request).await?,
    };
    let records = trace(&state, &id, &result.invocation_id, &signed).await?;
    Ok(task_page(
        &signed,
        &task,
        None,
        Some(&result),
        &result.invocation_id,
        &records,
    ))
}
