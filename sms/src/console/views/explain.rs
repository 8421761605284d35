//! Explain: pick a node, a task and session params; the node answers
//! with its registry and live connections, through the same function as
//! `spearlet explain` (`spear.v1.Invocation/Explain`), so both give the
//! same answer for the same inputs.

use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;
use spear_proto::v1::{ExplainRequest, SessionWrite};

use super::{badge, Failure, View};
use crate::console::guard::{Signed, Visit};
use crate::console::page;
use crate::console::Shared;

#[derive(Debug, Default, Deserialize)]
pub struct Inputs {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    node: String,
    #[serde(default)]
    task: String,
    /// One `key=json` per line, as `spearlet explain --set` takes them.
    #[serde(default)]
    params: String,
}

/// The session writes in `params`, or the sentence for the first bad line.
fn writes(params: &str) -> Result<Vec<SessionWrite>, Failure> {
    params
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (key, value) = line.split_once('=').ok_or_else(|| {
                Failure::new(
                    axum::http::StatusCode::BAD_REQUEST,
                    format!("session param line '{line}': expected KEY=JSON, such as mcp.tool_allowlist=[\"read_*\"]"),
                )
            })?;
            Ok(SessionWrite {
                key: key.trim().to_string(),
                value_json: value.trim().to_string(),
            })
        })
        .collect()
}

async fn form_page(
    state: &Shared,
    signed: &Signed,
    inputs: &Inputs,
    answer: Option<Markup>,
) -> View {
    let status = state.api.status(None).await?;
    let tasks = state.api.tasks().await?;
    let body = html! {
        form method="post" action="/explain" class="stack" {
            (page::csrf(&signed.session))
            label for="explain-node" { "Node" }
            select id="explain-node" name="node" required {
                @for node in status.nodes.iter().filter(|n| n.alive) {
                    @if node.node_id == inputs.node { option selected { (node.node_id) } } @else { option { (node.node_id) } }
                }
            }
            label for="explain-task" { "Task" }
            select id="explain-task" name="task" required {
                @for task in &tasks {
                    @if task.id == inputs.task { option selected { (task.id) } } @else { option { (task.id) } }
                }
            }
            label for="explain-params" { "Session params (one KEY=JSON per line, as cchat_ctl_set_param writes them)" }
            textarea id="explain-params" name="params" { (inputs.params) }
            p { button type="submit" class="primary" { "Explain" } }
        }
        @if let Some(answer) = answer { (answer) }
    };
    Ok(page::section_page(
        "Explain",
        "/explain",
        &signed.session,
        body,
    ))
}

pub async fn form(Visit { state, signed }: Visit) -> View {
    form_page(&state, &signed, &Inputs::default(), None).await
}

fn verdict(v: &Value) -> Markup {
    let offered = v["offered"].as_bool().unwrap_or(false);
    html! {
        @if offered { (badge("offered")) } @else { (badge("refused")) }
        " " span class="muted" { (v["layer"].as_str().unwrap_or_default()) } " "
        span class="rule" { (v["rule"].as_str().unwrap_or_default()) }
    }
}

fn answer(node: &str, explanation: &Value) -> Markup {
    let pretty = serde_json::to_string_pretty(explanation).unwrap_or_default();
    html! {
        h2 { "What a session would get on " span class="mono" { (node) } }
        p class="mono" id="explain-session" {
            @for (key, value) in explanation["session"].as_object().into_iter().flatten() {
                (key) "=" (value.to_string()) " "
            }
        }
        @for refused in explanation["refused_writes"].as_array().into_iter().flatten() {
            (page::notice("error", &format!("{}: {}", refused["write"].as_str().unwrap_or_default(), refused["error"].as_str().unwrap_or_default())))
        }
        table id="explain-table" {
            thead { tr { th { "Server" } th { "Tool" } th { "Decision and rule" } } }
            tbody {
                @for server in explanation["servers"].as_array().into_iter().flatten() {
                    @let id = server["server_id"].as_str().unwrap_or_default();
                    tr class="server" { td class="mono" { (id) } td {} td { (verdict(&server["verdict"])) } }
                    @for tool in server["tools"].as_array().into_iter().flatten() {
                        tr class="tool" { td {} td class="mono" { (tool["tool"].as_str().unwrap_or_default()) } td { (verdict(&tool["verdict"])) } }
                    }
                }
            }
        }
        details { summary { "As JSON (spearlet explain --json)" } pre id="explain-json" { (pretty) } }
    }
}

/// Explaining changes nothing, but it may start servers on the node to
/// list their tools: a POST with the CSRF token (viewers may ask).
pub async fn explain(Visit { state, signed }: Visit, Form(inputs): Form<Inputs>) -> View {
    signed.session.sent_by_us(&inputs.csrf)?;
    let response = state
        .api
        .explain(ExplainRequest {
            task_id: inputs.task.clone(),
            node_id: inputs.node.clone(),
            task: None,
            writes: writes(&inputs.params)?,
        })
        .await?;
    let explanation: Value = serde_json::from_str(&response.explanation_json).map_err(|e| {
        Failure::new(
            axum::http::StatusCode::BAD_GATEWAY,
            format!("node {} answered an explanation that is not JSON ({e}); is it the same version as SMS?", response.node_id),
        )
    })?;
    let shown = answer(&response.node_id, &explanation);
    form_page(&state, &signed, &inputs, Some(shown)).await
}
