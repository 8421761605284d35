//! Usage: what runs used and cost, totalled from the audit trail as `sms
//! usage` totals it (docs/usage.md), for a task or a principal, with a
//! chart of each window's cost over the last day, week or month. The
//! chart is drawn here as SVG (no script), each bar carrying its figures.

use axum::extract::Query;
use maud::{html, Markup};
use serde::Deserialize;
use spear_proto::v1::{RunUsage, UsageBucket, UsageRequest};

use super::View;
use crate::console::guard::Visit;
use crate::console::page::{self, enc};

const HOUR_MS: u64 = 3_600_000;
/// The chart's size, in SVG units.
const WIDTH: u64 = 720;
const HEIGHT: u64 = 160;

#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    task: String,
    #[serde(default)]
    principal: String,
    #[serde(default)]
    range: String,
}

/// A range's name, its length and its windows' length.
fn range(name: &str) -> (&'static str, u64, u64) {
    match name {
        "7d" => ("7d", 7 * 24 * HOUR_MS, 6 * HOUR_MS),
        "30d" => ("30d", 30 * 24 * HOUR_MS, 24 * HOUR_MS),
        _ => ("24h", 24 * HOUR_MS, HOUR_MS),
    }
}

fn dollars(nano: u64) -> String {
    format!("${:.6}", nano as f64 / 1e9)
}

fn totals(runs: u64, used: &RunUsage) -> Markup {
    // Each figure as a key, a label and its raw number (the page's
    // `data-value`, which tests and scripts read); the cost is shown in
    // dollars, the rest as they are.
    let rows: [(&str, &str, u64); 7] = [
        ("runs", "Runs", runs),
        ("model_requests", "Model requests", used.model_requests),
        (
            "unpriced_model_requests",
            "Unpriced requests",
            used.unpriced_model_requests,
        ),
        ("input_tokens", "Input tokens", used.input_tokens),
        ("output_tokens", "Output tokens", used.output_tokens),
        ("tool_calls", "Tool calls", used.tool_calls),
        ("cost_nano_usd", "Cost", used.cost_nano_usd),
    ];
    let shown = |key: &str, raw: u64| match key {
        "cost_nano_usd" => dollars(raw),
        _ => raw.to_string(),
    };
    html! {
        table id="usage-totals" {
            tbody {
                @for (key, label, raw) in rows {
                    tr data-key=(key) data-value=(raw) { th { (label) } td class="num" { (shown(key, raw)) } }
                }
            }
        }
    }
}

/// Each window of the range as a bar: its cost, or its tokens when
/// nothing in the range was priced.
fn chart(since: u64, span: u64, window: u64, buckets: &[UsageBucket]) -> Markup {
    let slots = span / window;
    let used = |b: &UsageBucket| b.used.unwrap_or_default();
    let priced = buckets.iter().any(|b| used(b).cost_nano_usd > 0);
    let value = |b: &UsageBucket| {
        let u = used(b);
        if priced {
            u.cost_nano_usd
        } else {
            u.input_tokens + u.output_tokens
        }
    };
    let top = buckets.iter().map(value).max().unwrap_or(0).max(1);
    let bar = WIDTH / slots.max(1);
    html! {
        p class="muted" { "Each bar is one window of " (window / HOUR_MS) " h (UTC), from "
            (page::time(since)) "; its height is the window's " (if priced { "cost" } else { "tokens (nothing was priced)" }) "." }
        svg id="usage-chart" role="img" aria-label="usage per window" viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) width=(WIDTH) height=(HEIGHT) {
            line x1="0" y1=(HEIGHT - 1) x2=(WIDTH) y2=(HEIGHT - 1) stroke="currentColor" {}
            @for b in buckets.iter().filter(|b| b.start_ms >= since) {
                @let slot = (b.start_ms - since) / window;
                @let h = (value(b) * (HEIGHT - 10) / top).max(1);
                rect class="bar" x=(slot * bar + 1) y=(HEIGHT - 1 - h) width=(bar.saturating_sub(2).max(1)) height=(h)
                    data-start=(b.start_ms) data-runs=(b.runs)
                    data-cost-nano-usd=(used(b).cost_nano_usd) data-tokens=(used(b).input_tokens + used(b).output_tokens) {
                    title { (page::time(b.start_ms)) ": " (b.runs) " runs, " (used(b).input_tokens + used(b).output_tokens) " tokens, " (dollars(used(b).cost_nano_usd)) }
                }
            }
        }
        table id="usage-windows" {
            thead { tr { th { "Window (UTC)" } th class="num" { "Runs" } th class="num" { "Requests" } th class="num" { "Tokens" } th class="num" { "Tool calls" } th class="num" { "Cost" } } }
            tbody {
                @for b in buckets.iter().rev() {
                    tr { td { (page::time(b.start_ms)) } td class="num" { (b.runs) } td class="num" { (used(b).model_requests) }
                         td class="num" { (used(b).input_tokens + used(b).output_tokens) } td class="num" { (used(b).tool_calls) }
                         td class="num" { (dollars(used(b).cost_nano_usd)) } }
                }
            }
        }
    }
}

fn filter_form(filters: &Filters, chosen: &str) -> Markup {
    html! {
        form method="get" action="/usage" class="search" role="search" {
            label { "Task " input type="text" name="task" value=(filters.task) size="14"; } " "
            label { "Principal " input type="text" name="principal" value=(filters.principal) size="28"; } " "
            label { "Range "
                select name="range" {
                    @for name in ["24h", "7d", "30d"] {
                        @if name == chosen { option selected { (name) } } @else { option { (name) } }
                    }
                }
            } " "
            button type="submit" { "Show" }
        }
    }
}

pub async fn page(Visit { state, signed }: Visit, Query(filters): Query<Filters>) -> View {
    let (chosen, span, window) = range(&filters.range);
    let now = spear_common::clock::now_ms();
    let since = (now + window).saturating_sub(span) / window * window;
    let response = state
        .api
        .usage(UsageRequest {
            task_id: filters.task.clone(),
            principal: filters.principal.clone(),
            since_ms: since,
            bucket_ms: window,
            ..UsageRequest::default()
        })
        .await?;
    let used = response.used.unwrap_or_default();
    let body = html! {
        (filter_form(&filters, chosen))
        (page::live("usage", "audit", html! {
            (totals(response.runs, &used))
            (chart(since, span, window, &response.buckets))
        }))
        p class="muted" { "The same totals as " code { "sms usage" } " over this range; prices are the nodes' [llm.prices]." }
    };
    let src = format!(
        "/usage?task={}&principal={}&range={chosen}",
        enc(&filters.task),
        enc(&filters.principal)
    );
    Ok(page::page("Usage", "/usage", &src, &signed.session, body))
}
