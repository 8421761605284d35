//! `sms pins ...`: the tool definitions nodes see against the pins, and an
//! operator's approvals (docs/trust.md).

use anyhow::Result;
use clap::Subcommand;
use spear_common::{safe_print, safe_println};
use spear_identity::Identity;
use spear_proto::v1::pins_client::PinsClient;
use spear_proto::v1::{ApprovePinsRequest, DiffPinsRequest, ListPinsRequest, RejectPinsRequest};
use tonic::transport::Channel;

use super::client::{connect, request, status_error};
use super::ClientArgs;

#[derive(Debug, Subcommand)]
pub enum PinsCommand {
    /// Every server's pin mode, pinned tools, and tools some node sees
    /// differently (drift), rejected, or disagreeing between nodes.
    List(ClientArgs),
    /// What changed in a server's tools (or one tool), as a diff of the
    /// definitions, and on which nodes.
    Diff {
        #[command(flatten)]
        client: ClientArgs,
        server: String,
        tool: Option<String>,
    },
    /// Make what nodes see now the pin, for the whole server or one tool;
    /// every node is updated over its watch.
    Approve {
        #[command(flatten)]
        client: ClientArgs,
        server: String,
        tool: Option<String>,
        /// Approve this node's definitions when nodes disagree.
        #[arg(long)]
        node: Option<String>,
    },
    /// Keep the pin: what nodes see now stays refused and is no longer
    /// listed as waiting.
    Reject {
        #[command(flatten)]
        client: ClientArgs,
        server: String,
        tool: Option<String>,
    },
}

async fn pins(client: &ClientArgs) -> Result<PinsClient<Channel>> {
    Ok(PinsClient::new(
        connect(client, &client.addr, Identity::Sms, "SMS").await?,
    ))
}

pub async fn run(command: PinsCommand) -> Result<i32> {
    match command {
        PinsCommand::List(client) => list(&client).await,
        PinsCommand::Diff {
            client,
            server,
            tool,
        } => {
            let asked = DiffPinsRequest {
                server_id: server,
                tool: tool.unwrap_or_default(),
            };
            let diff = pins(&client)
                .await?
                .diff_pins(request(&client, asked)?)
                .await
                .map_err(status_error)?
                .into_inner();
            // Definitions are a server's text: shown, never obeyed.
            safe_print!("{}", spear_common::text::printable_lines(&diff.text));
            Ok(0)
        }
        PinsCommand::Approve {
            client,
            server,
            tool,
            node,
        } => approve(&client, server, tool, node).await,
        PinsCommand::Reject {
            client,
            server,
            tool,
        } => {
            let asked = RejectPinsRequest {
                server_id: server,
                tool: tool.unwrap_or_default(),
            };
            let answer = pins(&client)
                .await?
                .reject_pins(request(&client, asked)?)
                .await
                .map_err(status_error)?
                .into_inner();
            safe_println!(
                "{} changed definitions rejected; the pins stand",
                answer.rejected
            );
            Ok(0)
        }
    }
}

/// `sms pins list`: each server's mode, pinned count and state.
async fn list(client: &ClientArgs) -> Result<i32> {
    let list = pins(client)
        .await?
        .list_pins(request(client, ListPinsRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner();
    if client.json {
        let rows: Vec<serde_json::Value> = list
            .servers
            .iter()
            .map(|s| {
                serde_json::json!({
                    "server": s.server_id, "mode": s.mode, "pinned": s.pinned,
                    "drifted": s.drifted, "rejected": s.rejected,
                    "disagreeing_nodes": s.disagreeing_nodes,
                })
            })
            .collect();
        spear_common::terminal::print_json(&serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    safe_println!("{:<32} {:<11} {:>6}  STATE", "SERVER", "MODE", "PINNED");
    for s in &list.servers {
        safe_println!(
            "{:<32} {:<11} {:>6}  {}",
            s.server_id,
            s.mode,
            s.pinned,
            spear_common::text::printable(&state_of(s))
        );
    }
    Ok(0)
}

/// A server's pin state in words.
fn state_of(s: &spear_proto::v1::PinState) -> String {
    let mut state = Vec::new();
    if !s.drifted.is_empty() {
        state.push(format!("changed: {}", s.drifted.join(", ")));
    }
    if !s.rejected.is_empty() {
        state.push(format!("rejected: {}", s.rejected.join(", ")));
    }
    if !s.disagreeing_nodes.is_empty() {
        state.push(format!(
            "nodes disagree: {}",
            s.disagreeing_nodes.join(", ")
        ));
    }
    if state.is_empty() {
        state.push(
            if s.mode == "off" {
                "not pinned"
            } else {
                "as pinned"
            }
            .into(),
        );
    }
    state.join("; ")
}

/// `sms pins approve`: the definitions as nodes see them now.
async fn approve(
    client: &ClientArgs,
    server: String,
    tool: Option<String>,
    node: Option<String>,
) -> Result<i32> {
    let asked = ApprovePinsRequest {
        server_id: server.clone(),
        tool: tool.clone().unwrap_or_default(),
        node_id: node.unwrap_or_default(),
    };
    let answer = pins(client)
        .await?
        .approve_pins(request(client, asked)?)
        .await
        .map_err(status_error)?
        .into_inner();
    let what = tool.map_or(format!("server {server}"), |t| {
        format!("tool {t} of server {server}")
    });
    safe_println!(
        "approved {what}: {} tools pinned, registry revision {}",
        answer.pinned,
        answer.revision
    );
    Ok(0)
}
