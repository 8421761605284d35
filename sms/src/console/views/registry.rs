//! Registry: every server with where it came from, its transport and
//! state; the files SMS refused, each with its sentence; and a server's
//! tools with their pin state. What `sms servers`, `sms status` and
//! `sms pins list` show.

use std::collections::BTreeMap;

use axum::extract::{Path, Query};
use maud::{html, Markup};
use spear_proto::v1::{PinState, ServerRecord, StatusResponse, Transport};

use super::{badge, View};
use crate::console::guard::Visit;
use crate::console::page::{self, enc, matches, paged, Paging};

/// Where a server was declared (`file:NAME` or `admin`), as
/// `sms servers` says it.
fn origin(record: &ServerRecord) -> String {
    record.source_label()
}

/// The transport, as server files spell it.
fn transport(record: &ServerRecord) -> &'static str {
    Transport::label_of(record.spec.as_ref().map_or(0, |s| s.transport))
}

/// Nodes that report the server failed, from their heartbeats.
fn failing_on(status: &StatusResponse) -> BTreeMap<&str, Vec<&str>> {
    let mut failing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in &status.nodes {
        for problem in node.problems.iter().filter(|p| p.failed) {
            failing
                .entry(problem.server_id.as_str())
                .or_default()
                .push(node.node_id.as_str());
        }
    }
    failing
}

fn problems(status: &StatusResponse) -> Markup {
    html! {
        h2 { "Files with problems" }
        @if status.file_problems.is_empty() {
            p class="muted" id="no-problems" { "Every file in the MCP directory is accepted." }
        } @else {
            table id="problems-table" {
                thead { tr { th { "File" } th { "Where" } th { "Problem" } } }
                tbody {
                    @for problem in &status.file_problems {
                        tr {
                            td class="mono" { (problem.file) }
                            td class="mono" { (problem.path) }
                            td { (problem.message) }
                        }
                    }
                }
            }
        }
    }
}

pub async fn list(Visit { state, signed }: Visit, Query(paging): Query<Paging>) -> View {
    let status = state.api.status(None).await?;
    let servers = state.api.servers().await?;
    let pins: BTreeMap<String, PinState> = state
        .api
        .pins()
        .await?
        .into_iter()
        .map(|p| (p.server_id.clone(), p))
        .collect();
    let failing = failing_on(&status);
    let found: Vec<&ServerRecord> = servers
        .servers
        .iter()
        .filter(|r| {
            let spec = r.spec.clone().unwrap_or_default();
            matches(
                &paging.q,
                &[&spec.id, &origin(r), &spec.description, transport(r)],
            )
        })
        .collect();
    let (rows, pager) = paged(found, &paging, "/");
    let body = html! {
        (page::live("registry-summary", "registry problems", html! {
            div class="summary" {
                div { strong id="server-count" { (servers.servers.len()) } "servers" }
                div { strong { (servers.revision) } "registry revision" }
                div { strong id="problem-count" { (status.file_problems.len()) } "file problems" }
            }
        }))
        (page::live("problems", "problems", problems(&status)))
        h2 { "Servers" }
        (page::search("/", &paging, "Find a server"))
        (page::live("servers", "registry trust", html! {
            table id="servers-table" {
                thead { tr { th { "Server" } th { "Declared in" } th { "Transport" } th { "State" } th { "Pins" } th { "Description" } } }
                tbody {
                    @for record in &rows {
                        @let spec = record.spec.clone().unwrap_or_default();
                        @let pin = pins.get(&spec.id);
                        tr data-server=(spec.id) {
                            td { a href={"/servers/" (enc(&spec.id))} { (spec.id) } }
                            td class="mono" {
                                (origin(record))
                                @if let Some(r) = &spec.registry { br; span class="muted" { "registry " (r.name) " " (r.version) ": " (r.package) } }
                            }
                            td { (transport(record)) }
                            td {
                                @if !spec.enabled { (badge("disabled")) }
                                @else if let Some(nodes) = failing.get(spec.id.as_str()) {
                                    (badge("failed")) " on " (nodes.len()) " node(s)"
                                } @else { (badge("enabled")) }
                            }
                            td {
                                @match pin {
                                    Some(pin) => {
                                        (pin.mode) " · " (pin.pinned) " pinned"
                                        @if !pin.drifted.is_empty() { " · " (badge("drifted")) " " (pin.drifted.len()) }
                                    }
                                    None => { span class="muted" { "—" } }
                                }
                            }
                            td { (spec.description) }
                        }
                    }
                }
            }
            (pager)
        }))
    };
    let shown = page::list_page("Registry", "/", &paging, &signed.session, body);
    Ok(shown)
}

pub async fn server(Visit { state, signed }: Visit, Path(id): Path<String>) -> View {
    let servers = state.api.servers().await?;
    let Some(record) = servers
        .servers
        .iter()
        .find(|r| r.spec.as_ref().is_some_and(|s| s.id == id))
    else {
        return Err(super::Failure::new(
            axum::http::StatusCode::NOT_FOUND,
            format!("no server '{id}' in the registry; it may have been removed"),
        ));
    };
    let spec = record.spec.clone().unwrap_or_default();
    let pin = state
        .api
        .pins()
        .await?
        .into_iter()
        .find(|p| p.server_id == id);
    let status = state.api.status(None).await?;
    let pinned: Vec<(&String, &String)> = record
        .pins
        .as_ref()
        .map(|p| p.tools.iter().collect())
        .unwrap_or_default();
    let body = html! {
        (page::live("server", "registry trust nodes", html! {
        table class="facts" {
            tr { th { "Declared in" } td class="mono" { (origin(record)) } }
            @if let Some(r) = &spec.registry {
                tr { th { "From the MCP Registry" } td class="mono" { (r.name) " " (r.version) " · runs " (r.package) } }
            }
            tr { th { "Transport" } td { (transport(record)) } }
            tr { th { "Enabled" } td { (spec.enabled) } }
            @if !spec.command.is_empty() {
                tr { th { "Command" } td class="mono" { (spec.command) @for arg in &spec.args { " " (arg) } } }
            }
            @if !spec.url.is_empty() { tr { th { "URL" } td class="mono" { (spec.url) } } }
            tr { th { "Environment" } td class="mono" { @for name in spec.env.keys() { (name) " " } @for s in &spec.sealed { (s.name) " (sealed) " } } }
            tr { th { "Headers" } td class="mono" { @for name in spec.headers.keys() { (name) " " } } }
            tr { th { "Allowed tools" } td class="mono" { @match &spec.allowed_tools { Some(p) => { (p.patterns.join(", ")) } None => { "all" } } } }
            tr { th { "Denied tools" } td class="mono" { (spec.denied_tools.join(", ")) } }
            tr { th { "Nodes" } td class="mono" { @if spec.nodes.is_empty() { "every node" } @else { (spec.nodes.join(", ")) } } }
            tr { th { "Approval per call" } td class="mono" { @match &spec.approval { Some(a) if !a.tools.is_empty() => { (a.tools.join(", ")) } _ => { "none" } } } }
            tr { th { "Description" } td { (spec.description) } }
        }
        h2 { "Tools" }
        @if let Some(pin) = &pin {
            p { "Pin mode " strong { (pin.mode) } ". "
                @if !pin.drifted.is_empty() || !pin.disagreeing_nodes.is_empty() {
                    a href={"/trust/pins/" (enc(&id))} { "See what changed" }
                }
            }
        }
        table id="tools-table" {
            thead { tr { th { "Tool" } th { "Pin" } th { "Digest" } } }
            tbody {
                @for (tool, digest) in &pinned {
                    tr {
                        td class="mono" { (tool) }
                        td { @if pin.as_ref().is_some_and(|p| p.drifted.contains(tool)) { (badge("drifted")) } @else { (badge("pinned")) } }
                        td class="mono" { (digest.get(..16).unwrap_or(digest)) "…" }
                    }
                }
                @if let Some(pin) = &pin {
                    @for tool in pin.drifted.iter().filter(|t| !pinned.iter().any(|(p, _)| p == t)) {
                        tr { td class="mono" { (tool) } td { (badge("held")) " not pinned yet" } td {} }
                    }
                    @for tool in &pin.rejected {
                        tr { td class="mono" { (tool) } td { (badge("rejected")) } td {} }
                    }
                }
            }
        }
        h2 { "On nodes" }
        ul {
            @for node in &status.nodes {
                @for problem in node.problems.iter().filter(|p| p.server_id == id) {
                    li { a href={"/nodes/" (enc(&node.node_id))} { (node.node_id) } ": " (problem.message) }
                }
            }
        }
        }))
    };
    Ok(page::page(
        &format!("Server {id}"),
        "/",
        &format!("/servers/{}", enc(&id)),
        &signed.session,
        body,
    ))
}
