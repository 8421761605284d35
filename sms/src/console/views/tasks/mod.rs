//! Tasks: the registered tasks; register one (a module uploaded or named
//! by URI, and its config, checked by the same code as
//! `sms tasks register`); delete; invoke with an input and see the
//! output, the exit and the run's trace: each model request and tool
//! call as the node recorded it in the audit trail, with the rule that
//! allowed the call.

mod register;
mod run;

use std::collections::BTreeMap;

use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use spear_proto::audit::{Kind, Record};
use spear_proto::v1::{QueryAuditRequest, TaskSpec};

use super::audit::parse;
use super::{notice_of, CsrfForm, Failure, View};
use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc};
use crate::console::Shared;

pub use register::{register, MAX_UPLOAD};
pub use run::{invoke, task};

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

/// Records the task's runs left in the trail (every task's, for ""):
/// the newest [`RECORDS`].
async fn task_records(state: &Shared, task: &str) -> Result<Vec<Record>, Failure> {
    let response = state
        .api
        .audit(QueryAuditRequest {
            task_id: task.to_string(),
            limit: RECORDS,
            ..Default::default()
        })
        .await?;
    Ok(parse(&response))
}

/// Audit records a tasks page reads.
const RECORDS: u32 = 1000;

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
    let mut by_id: BTreeMap<String, Invocation> = BTreeMap::new();
    for record in task_records(state, task).await? {
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

pub async fn list(Visit { state, signed }: Visit, Query(shown): Query<Shown>) -> View {
    let mut tasks = state.api.tasks().await?;
    // A person sees the tasks they may invoke, and nobody's runs.
    let recent = match &signed.session.person {
        Some(person) => {
            tasks.retain(|task| may_invoke(&person.principal, task));
            Vec::new()
        }
        None => invocations(&state, "").await?,
    };
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
        @if !signed.session.is_person() {
            h2 { "Recent invocations" }
            (page::live("recent", "audit", invocations_table(recent)))
        }
        @if signed.session.is_admin() { (register::form(signed, state.module_dir.is_some())) }
    };
    page::page("Tasks", "/tasks", "/tasks", &signed.session, body)
}

/// Whether `principal` may invoke `task` (its "invokers").
fn may_invoke(principal: &spear_proto::v1::Principal, task: &TaskSpec) -> bool {
    crate::grpc::invokers::Invokers::admit(principal, task).is_ok()
}

pub async fn delete(
    Visit { state, signed }: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Failure> {
    signed.session.may_write(&form.csrf)?;
    state.api.delete_task(&id).await?;
    Ok(Redirect::to("/tasks?notice=deleted").into_response())
}
