//! Audit: the fleet's trail with the filters of `sms audit`, and
//! `verify`, which proves each chain whole or names its first problem.
//! Also the table a task's trace is shown in.

use axum::extract::Query;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use spear_proto::audit::{Kind, Record};
use spear_proto::v1::{QueryAuditRequest, QueryAuditResponse};

use super::audit_disputes::{self, Disputed};
use super::{badge, CsrfForm, Failure, View};
use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc};
use crate::console::Shared;

/// Records one page shows.
pub const LIMIT: u32 = 200;

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::ToolCall => "tool call",
        Kind::ModelRequest => "model request",
        Kind::Pin => "pin",
        Kind::Admin => "admin",
        Kind::Reset => "reset",
    }
}

/// The query's records, parsed, with their nodes; a line SMS holds that
/// does not parse is left out (`verify` names it).
pub fn parse(response: &QueryAuditResponse) -> Vec<Record> {
    response
        .records
        .iter()
        .filter_map(|line| serde_json::from_str::<Record>(&line.json).ok())
        .collect()
}

/// Records as a table, oldest first.
pub fn table(id: &str, records: &[Record]) -> Markup {
    html! {
        table id=(id) class="audit" {
            thead { tr {
                th { "Time (UTC)" } th { "Node" } th class="num" { "Seq" } th { "Kind" } th { "Outcome" }
                th { "Task · invocation" } th { "Server · tool" } th { "Rule" } th { "Who · what" }
                th class="num" { "µs" } th class="num" { "Calls used" } th class="num" { "Tokens in/out" }
            } }
            tbody {
                @for r in records {
                    tr data-outcome=(r.outcome.name()) data-kind=(kind_name(r.kind)) {
                        td { (page::time(r.time_ms)) }
                        td class="mono" { (r.node) }
                        td class="num" { (r.seq) }
                        td { (kind_name(r.kind)) }
                        td { (badge(r.outcome.name())) }
                        td class="mono" { (r.task) @if !r.invocation.is_empty() { " · " (r.invocation) } }
                        td class="mono" { (r.server) @if !r.tool.is_empty() { " · " (r.tool) } @if !r.model.is_empty() { (r.backend) " · " (r.model) } }
                        td class="rule" { (r.rule) }
                        td { (r.identity) @if !r.action.is_empty() { " · " (r.action) " " (r.target) } }
                        td class="num" { @if let Some(us) = r.duration_us { (us) } }
                        td class="num" { @if let Some(n) = r.tool_calls_used { (n) } }
                        td class="num" { @if r.input_tokens.is_some() || r.output_tokens.is_some() { (r.input_tokens.unwrap_or(0)) " / " (r.output_tokens.unwrap_or(0)) } }
                    }
                }
            }
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    task: String,
    #[serde(default)]
    node: String,
    #[serde(default)]
    server: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    outcome: String,
}

impl Filters {
    fn query(&self) -> String {
        format!(
            "task={}&node={}&server={}&tool={}&outcome={}",
            enc(&self.task),
            enc(&self.node),
            enc(&self.server),
            enc(&self.tool),
            enc(&self.outcome)
        )
    }
}

fn filter_form(filters: &Filters) -> Markup {
    html! {
        form method="get" action="/audit" class="search" role="search" {
            label { "Task " input type="text" name="task" value=(filters.task) size="12"; } " "
            label { "Node " input type="text" name="node" value=(filters.node) size="12"; } " "
            label { "Server " input type="text" name="server" value=(filters.server) size="12"; } " "
            label { "Tool " input type="text" name="tool" value=(filters.tool) size="12"; } " "
            label { "Outcome "
                select name="outcome" {
                    option value="" { "any" }
                    @for name in spear_proto::audit::Outcome::NAMES {
                        @if name == filters.outcome { option selected { (name) } } @else { option { (name) } }
                    }
                }
            } " "
            button type="submit" { "Filter" }
        }
    }
}

/// What the page shows of the trail.
struct Trail {
    records: Vec<Record>,
    left_out: u64,
    disputed: Vec<Disputed>,
}

async fn trail(state: &Shared, filters: &Filters) -> Result<Trail, Failure> {
    let response = state
        .api
        .audit(QueryAuditRequest {
            task_id: filters.task.clone(),
            node_id: filters.node.clone(),
            server_id: filters.server.clone(),
            tool: filters.tool.clone(),
            outcome: filters.outcome.clone(),
            since_ms: 0,
            limit: LIMIT,
        })
        .await?;
    Ok(Trail {
        records: parse(&response),
        left_out: response.left_out,
        disputed: audit_disputes::disputed(&response),
    })
}

fn render(signed: &Signed, filters: &Filters, trail: &Trail, verified: Option<Markup>) -> Markup {
    let (records, left_out) = (&trail.records, trail.left_out);
    let body = html! {
        (filter_form(filters))
        form method="post" action="/audit/verify" class="inline" {
            (page::csrf(&signed.session))
            button type="submit" { "Verify every chain" }
        }
        @if let Some(verified) = verified { (verified) }
        (audit_disputes::section(&trail.disputed))
        (page::live("trail", "audit", html! {
            @if left_out > 0 { p class="muted" { "The newest " (records.len()) " shown; " (left_out) " older match too: narrow the filters." } }
            (table("audit-table", records))
        }))
    };
    page::page(
        "Audit trail",
        "/audit",
        &format!("/audit?{}", filters.query()),
        &signed.session,
        body,
    )
}

pub async fn page(Visit { state, signed }: Visit, Query(filters): Query<Filters>) -> View {
    let trail = trail(&state, &filters).await?;
    Ok(render(&signed, &filters, &trail, None))
}

/// Verifying reads every chain: a read, but a costly one, so it is a
/// POST with the CSRF token (viewers may run it).
pub async fn verify(Visit { state, signed }: Visit, Form(form): Form<CsrfForm>) -> View {
    signed.session.sent_by_us(&form.csrf)?;
    let chains = state.api.verify_audit().await?;
    let whole = chains.iter().all(|c| c.problem.is_empty());
    let verified = html! {
        h2 { "Verification" }
        p id="verify-result" { @if whole { (badge("whole")) " every chain is whole" } @else { (badge("broken")) " a chain is not whole" } }
        table id="chains" {
            thead { tr { th { "Chain" } th class="num" { "Records" } th class="num" { "First" } th class="num" { "Last" } th { "Problem" } } }
            tbody {
                @for chain in &chains {
                    tr { td class="mono" { (chain.node_id) } td class="num" { (chain.records) } td class="num" { (chain.first_seq) } td class="num" { (chain.last_seq) } td { (chain.problem) } }
                }
            }
        }
    };
    let filters = Filters::default();
    let trail = trail(&state, &filters).await?;
    Ok(render(&signed, &filters, &trail, Some(verified)))
}
