//! Nodes: the fleet's convergence (how many nodes hold the current
//! revision, how far behind the rest are), each node's heartbeat, and a
//! node's MCP servers with their state and agreed protocol version.
//! What `sms status` shows.

use axum::extract::{Path, Query};
use maud::html;
use spear_proto::v1::{NodeStatus, SyncState};

use super::{badge, Failure, View};
use crate::console::guard::Visit;
use crate::console::page::{self, enc, matches, paged, Paging};

/// A node is current when it is alive and has applied SMS's revision.
fn is_current(node: &NodeStatus) -> bool {
    node.alive && node.lag == 0
}

fn sync_name(node: &NodeStatus) -> &'static str {
    SyncState::label_of(node.sync_state)
}

fn seconds_ago(ms: u64) -> String {
    format!("{:.1} s ago", ms as f64 / 1000.0)
}

pub async fn list(Visit { state, signed }: Visit, Query(paging): Query<Paging>) -> View {
    let status = state.api.status(None).await?;
    let alive = status.nodes.iter().filter(|n| n.alive).count();
    let current = status.nodes.iter().filter(|n| is_current(n)).count();
    let behind: Vec<u64> = status
        .nodes
        .iter()
        .filter(|n| n.alive && n.lag > 0)
        .map(|n| n.lag)
        .collect();
    let max_lag = behind.iter().copied().max().unwrap_or(0);
    let converged = alive > 0 && current == alive;
    let mut nodes: Vec<&NodeStatus> = status
        .nodes
        .iter()
        .filter(|n| matches(&paging.q, &[&n.node_id, &n.version, &n.invoke_addr]))
        .collect();
    // The ones that need a look first: not alive, then furthest behind.
    nodes.sort_by(|a, b| {
        (a.alive, std::cmp::Reverse(a.lag), &a.node_id).cmp(&(
            b.alive,
            std::cmp::Reverse(b.lag),
            &b.node_id,
        ))
    });
    let (rows, pager) = paged(nodes, &paging, "/nodes");
    let body = html! {
        (page::live("fleet", "nodes registry", html! {
            div class="summary" {
                div { strong id="revision" { (status.revision) } "SMS revision" }
                div { strong id="nodes-total" { (status.nodes.len()) } "nodes" }
                div { strong id="nodes-alive" { (alive) } "alive" }
                div { strong id="nodes-current" { (current) } "hold the current revision" }
                div { strong id="nodes-behind" { (behind.len()) } "behind (most " (max_lag) " revisions)" }
                div { strong id="convergence" { @if converged { "all current" } @else if alive == 0 { "no node" } @else { "converging" } } "fleet" }
            }
        }))
        (page::search("/nodes", &paging, "Find a node"))
        (page::live("nodes", "nodes registry", html! {
            table id="nodes-table" {
                thead { tr {
                    th { "Node" } th { "Alive" } th class="num" { "Applied revision" } th class="num" { "Lag" }
                    th { "Last heartbeat" } th { "Registry" } th class="num" { "Runs" } th { "Draining" }
                    th class="num" { "Servers" } th class="num" { "Problems" } th { "Version" }
                } }
                tbody {
                    @for node in &rows {
                        tr data-node=(node.node_id) {
                            td { a href={"/nodes/" (enc(&node.node_id))} { (node.node_id) } }
                            td class="alive" { (badge(liveness(node))) }
                            td class="num applied" { (node.applied_revision) }
                            td class="num lag" { (node.lag) }
                            td { (seconds_ago(node.last_seen_ms)) }
                            td { (badge(sync_name(node))) }
                            td class="num" { (node.running) }
                            td { @if node.draining { (badge("draining")) } @else { "no" } }
                            td class="num" { (node.server_total) }
                            td class="num" { (node.problems.len()) }
                            td class="mono" { (node.version) }
                        }
                    }
                }
            }
            (pager)
        }))
    };
    let shown = page::list_page("Nodes", "/nodes", &paging, &signed.session, body);
    Ok(shown)
}

pub async fn node(Visit { state, signed }: Visit, Path(id): Path<String>) -> View {
    let status = state.api.status(Some(&id)).await?;
    let Some(node) = status.nodes.first() else {
        return Err(Failure::new(
            axum::http::StatusCode::NOT_FOUND,
            format!("SMS has not heard from a node '{id}' (nodes it has not heard from for 10 minutes are forgotten)"),
        ));
    };
    let body = html! {
        (page::live("node", "nodes registry", html! {
            table class="facts" {
                tr { th { "Alive" } td { (badge(liveness(node))) } }
                tr { th { "Applied revision" } td { (node.applied_revision) " (SMS: " (status.revision) ", lag " (node.lag) ")" } }
                tr { th { "Last heartbeat" } td { (seconds_ago(node.last_seen_ms)) } }
                tr { th { "Registry" } td { (badge(sync_name(node))) } }
                tr { th { "Runs in progress" } td { (node.running) } }
                tr { th { "Draining" } td { (node.draining) } }
                tr { th { "Invocation address" } td class="mono" { (node.invoke_addr) } }
                tr { th { "Version" } td class="mono" { (node.version) } }
            }
            h2 { "MCP servers" }
            @if node.server_total as usize > node.servers.len() {
                p class="muted" { "The first " (node.servers.len()) " of " (node.server_total) " by id." }
            }
            table id="node-servers" {
                thead { tr { th { "Server" } th { "State" } th { "Protocol" } th { "Sandbox" } th class="num" { "Tools" } th class="num" { "Held" } } }
                tbody {
                    @for server in &node.servers {
                        tr data-server=(server.server_id) {
                            td { a href={"/servers/" (enc(&server.server_id))} { (server.server_id) } }
                            td { (badge(&server.state)) }
                            td class="mono" { (server.protocol_version) }
                            td { (server.sandbox) }
                            td class="num" { (server.tools) }
                            td class="num" { (server.held) }
                        }
                    }
                }
            }
            h2 { "Problems" }
            ul {
                @for problem in &node.problems {
                    li { span class="mono" { (problem.server_id) } ": " (problem.message) }
                }
            }
        }))
    };
    Ok(page::page(
        &format!("Node {id}"),
        "/nodes",
        &format!("/nodes/{}", enc(&id)),
        &signed.session,
        body,
    ))
}

/// A node's liveness as the views say it: alive, left (it stopped), or
/// not alive (lost).
fn liveness(node: &spear_proto::v1::NodeStatus) -> &'static str {
    match (node.alive, node.left) {
        (true, _) => "alive",
        (false, true) => "left",
        (false, false) => "not alive",
    }
}
