//! Trust: approvals waiting for a person (approve, deny with a reason),
//! recent decisions, and pins that drifted with their diff and approve.
//! What `sms approvals` and `sms pins` show and do.

use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use spear_proto::v1::{ApprovalInfo, ApprovalState};

use super::{badge, notice_of, Failure, View};
use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc, paged, Paging};

#[derive(Debug, Default, Deserialize)]
pub struct Shown {
    #[serde(default)]
    notice: String,
    /// The approvals' page (50 rows each; pending first).
    #[serde(default)]
    page: usize,
}

fn state_name(info: &ApprovalInfo) -> &'static str {
    crate::approvals::state_name(info.state())
}

/// Approve and deny, for an admin.
fn decide_forms(signed: &Signed, id: &str) -> Markup {
    html! {
        @if signed.session.is_admin() {
            form method="post" action={"/trust/approvals/" (enc(id))} class="inline" {
                (page::csrf(&signed.session))
                input type="hidden" name="decision" value="approve";
                button type="submit" class="primary" data-action="approve" { "Approve" }
            }
            " "
            form method="post" action={"/trust/approvals/" (enc(id))} class="inline" {
                (page::csrf(&signed.session))
                input type="hidden" name="decision" value="deny";
                label { "Reason " input type="text" name="reason" size="16"; }
                button type="submit" class="danger" data-action="deny" { "Deny" }
            }
        }
    }
}

/// One approval: who asked (node, task, invocation, caller), for which
/// call, until when, and while it is pending the arguments an admin
/// decides on (the server's secrets replaced by the node; format
/// characters escaped, as in a terminal).
pub async fn approval(Visit { state, signed }: Visit, Path(id): Path<String>) -> View {
    let info = state.api.approval(&id).await?;
    let binding = info.binding.clone().unwrap_or_default();
    let pending = info.state() == ApprovalState::Pending;
    let arguments = serde_json::from_str::<serde_json::Value>(&info.arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| info.arguments.clone());
    let body = html! {
        table id="approval" {
            tr { th { "State" } td { (badge(state_name(&info))) } }
            tr { th { "Server · tool" } td class="mono" { (binding.server_id) " · " (binding.tool) } }
            tr { th { "Asked by node" } td class="mono" { (binding.node_id) } }
            tr { th { "Task · invocation" } td class="mono" { (binding.task_id) " · " (binding.invocation_id) } }
            tr { th { "Caller" } td { (binding.identity) } }
            tr { th { "Asked (UTC)" } td { (page::time(info.created_at_ms)) } }
            tr { th { "Expires (UTC)" } td id="approval-expires" { (page::time(info.expires_at_ms)) } }
            tr { th { "Arguments digest" } td class="mono" { (binding.arguments_digest) } }
            @if !info.decided_by.is_empty() {
                tr { th { "Decided" } td { (info.decided_by) @if !info.reason.is_empty() { ": " (info.reason) } } }
            }
        }
        @if pending {
            h2 { "Arguments" }
            pre id="approval-arguments" { (spear_common::text::printable_lines(&arguments)) }
            p { (decide_forms(&signed, &info.approval_id)) }
        }
    };
    Ok(page::page(
        &format!("Approval {}", info.approval_id),
        "/trust",
        &format!("/trust/approvals/{}", enc(&info.approval_id)),
        &signed.session,
        body,
    ))
}

fn approval_row(signed: &Signed, info: &ApprovalInfo) -> Markup {
    let binding = info.binding.clone().unwrap_or_default();
    let pending = info.state() == ApprovalState::Pending;
    html! {
        tr data-approval=(info.approval_id) data-state=(state_name(info)) {
            td class="mono" { a href={"/trust/approvals/" (enc(&info.approval_id))} { (info.approval_id) } }
            td { (badge(state_name(info))) }
            td class="mono" { (binding.server_id) " · " (binding.tool) }
            td class="mono" { (binding.task_id) " · " (binding.invocation_id) }
            td class="mono" { (binding.node_id) }
            td { (binding.identity) }
            td class="mono" { (binding.arguments_digest.get(..12).unwrap_or_default()) "…" }
            td { (page::time(info.created_at_ms)) }
            td { (page::time(info.expires_at_ms)) }
            td { (info.decided_by) @if !info.reason.is_empty() { ": " (info.reason) } }
            td {
                @if pending { (decide_forms(signed, &info.approval_id)) }
            }
        }
    }
}

pub async fn page(Visit { state, signed }: Visit, Query(shown): Query<Shown>) -> View {
    let mut approvals = state.api.approvals().await?;
    // Pending first, then newest.
    approvals.sort_by(|a, b| {
        (
            a.state() != ApprovalState::Pending,
            std::cmp::Reverse(a.created_at_ms),
        )
            .cmp(&(
                b.state() != ApprovalState::Pending,
                std::cmp::Reverse(b.created_at_ms),
            ))
    });
    let pins = state.api.pins().await?;
    let attention: Vec<_> = pins
        .iter()
        .filter(|p| {
            !p.drifted.is_empty() || !p.disagreeing_nodes.is_empty() || !p.rejected.is_empty()
        })
        .collect();
    let pending = approvals
        .iter()
        .filter(|a| a.state() == ApprovalState::Pending)
        .count();
    let paging = Paging {
        q: String::new(),
        page: shown.page,
    };
    let (approvals, pager) = paged(approvals, &paging, "/trust");
    let more_pins = attention.len().saturating_sub(page::PER_PAGE);
    let body = html! {
        @if let Some(notice) = notice_of(&shown.notice) { (notice) }
        (page::live("approvals", "trust", html! {
            h2 { "Approvals " span class="muted" id="pending-count" { "(" (pending) " pending)" } }
            table id="approvals-table" {
                thead { tr {
                    th { "Approval" } th { "State" } th { "Server · tool" } th { "Task · invocation" } th { "Node" }
                    th { "Caller" } th { "Arguments digest" } th { "Asked (UTC)" } th { "Expires (UTC)" } th { "Decided" } th { "" }
                } }
                tbody { @for info in &approvals { (approval_row(&signed, info)) } }
            }
            (pager)
        }))
        (page::live("pins", "trust registry", html! {
            h2 { "Pins that need a look" }
            @if attention.is_empty() {
                p class="muted" id="no-drift" { "Every node sees every pinned tool as pinned." }
            } @else {
                table id="drift-table" {
                    thead { tr { th { "Server" } th { "Mode" } th { "Drifted" } th { "Nodes disagreeing" } th { "Rejected" } th { "" } } }
                    tbody {
                        @for pin in attention.iter().take(page::PER_PAGE) {
                            tr data-server=(pin.server_id) {
                                td class="mono" { (pin.server_id) }
                                td { (pin.mode) }
                                td class="mono" { (pin.drifted.join(", ")) }
                                td class="mono" { (pin.disagreeing_nodes.join(", ")) }
                                td class="mono" { (pin.rejected.join(", ")) }
                                td { a href={"/trust/pins/" (enc(&pin.server_id))} { "Diff" } }
                            }
                        }
                    }
                }
                @if more_pins > 0 {
                    p class="muted" { "and " (more_pins) " more servers: " code { "sms pins list" } " shows every one." }
                }
            }
        }))
    };
    Ok(page::list_page(
        "Trust",
        "/trust",
        &paging,
        &signed.session,
        body,
    ))
}

#[derive(Deserialize)]
pub struct Decision {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    decision: String,
    #[serde(default)]
    reason: String,
}

pub async fn decide(
    Visit { state, signed }: Visit,
    Path(id): Path<String>,
    Form(form): Form<Decision>,
) -> Result<Response, Failure> {
    signed.session.may_write(&form.csrf)?;
    let approve = match form.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(Failure::new(
                axum::http::StatusCode::BAD_REQUEST,
                format!("decision '{other}' is neither approve nor deny"),
            ))
        }
    };
    let reason = if !approve && form.reason.trim().is_empty() {
        "denied from the console".to_string()
    } else {
        form.reason.trim().to_string()
    };
    state.api.decide(&id, approve, &reason).await?;
    let notice = if approve { "approved" } else { "denied" };
    Ok(Redirect::to(&format!("/trust?notice={notice}")).into_response())
}

pub async fn diff(
    Visit { state, signed }: Visit,
    Path(server): Path<String>,
    Query(shown): Query<Shown>,
) -> View {
    let text = state.api.pin_diff(&server, "").await?;
    let pin = state
        .api
        .pins()
        .await?
        .into_iter()
        .find(|p| p.server_id == server);
    let body = html! {
        @if let Some(notice) = notice_of(&shown.notice) { (notice) }
        (page::live("diff", "trust registry", html! {
            pre id="pin-diff" { (text) }
        }))
        @if signed.session.is_admin() {
            form method="post" action={"/trust/pins/" (enc(&server))} class="stack" {
                (page::csrf(&signed.session))
                label for="pin-tool" { "Tool (empty: every tool of the server)" }
                input id="pin-tool" type="text" name="tool";
                @if let Some(pin) = pin.as_ref().filter(|p| !p.disagreeing_nodes.is_empty()) {
                    label for="pin-node" { "Nodes disagree: approve the definitions of" }
                    select id="pin-node" name="node" {
                        @for node in &pin.disagreeing_nodes { option { (node) } }
                    }
                }
                p { button type="submit" class="primary" id="approve-pins" { "Approve as nodes see it now" } }
            }
        }
    };
    Ok(page::page(
        &format!("Pins of {server}"),
        "/trust",
        &format!("/trust/pins/{}", enc(&server)),
        &signed.session,
        body,
    ))
}

#[derive(Deserialize)]
pub struct PinApproval {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    node: String,
}

pub async fn approve_pins(
    Visit { state, signed }: Visit,
    Path(server): Path<String>,
    Form(form): Form<PinApproval>,
) -> Result<Response, Failure> {
    signed.session.may_write(&form.csrf)?;
    state
        .api
        .approve_pins(&server, form.tool.trim(), form.node.trim())
        .await?;
    Ok(Redirect::to(&format!(
        "/trust/pins/{}?notice=pins-approved",
        enc(&server)
    ))
    .into_response())
}
