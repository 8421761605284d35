//! `sms approvals ...`: calls waiting for a person, and their decisions
//! (docs/trust.md).

use anyhow::Result;
use clap::Subcommand;
use spear_common::safe_println;
use spear_common::text::printable;
use spear_identity::Identity;
use spear_proto::v1::approvals_client::ApprovalsClient;
use spear_proto::v1::{
    ApprovalInfo, ApprovalState, DecideApprovalRequest, ListApprovalsRequest, ShowApprovalRequest,
};
use tonic::transport::Channel;

use super::client::{connect, request, status_error};
use super::ClientArgs;
use crate::approvals::state_name;

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Every approval SMS holds: pending ones first to decide, then the
    /// decided ones of the last hour.
    List(ClientArgs),
    /// One approval, with the call's arguments while it is pending (the
    /// server's secrets are replaced by the node).
    Show {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
    },
    /// Let that one call run, once.
    Approve {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
    },
    /// Refuse it; the model is told, with the reason.
    Deny {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
}

async fn approvals(client: &ClientArgs) -> Result<ApprovalsClient<Channel>> {
    Ok(ApprovalsClient::new(
        connect(client, &client.addr, Identity::Sms, "SMS").await?,
    ))
}

fn to_json(a: &ApprovalInfo) -> serde_json::Value {
    let b = a.binding.clone().unwrap_or_default();
    serde_json::json!({
        "id": a.approval_id, "state": state_name(a.state()),
        "node": b.node_id, "task": b.task_id, "invocation": b.invocation_id,
        "identity": b.identity, "server": b.server_id, "tool": b.tool,
        "arguments_digest": b.arguments_digest, "pin_digest": b.pin_digest,
        "policy_revision": b.policy_revision, "created_at_ms": a.created_at_ms,
        "expires_at_ms": a.expires_at_ms, "decided_by": a.decided_by, "reason": a.reason,
    })
}

pub async fn run(command: ApprovalsCommand) -> Result<i32> {
    match command {
        ApprovalsCommand::List(client) => {
            let list = approvals(&client)
                .await?
                .list_approvals(request(&client, ListApprovalsRequest {})?)
                .await
                .map_err(status_error)?
                .into_inner();
            let mut all = list.approvals;
            all.sort_by_key(|a| a.state() != ApprovalState::Pending);
            if client.json {
                let rows: Vec<serde_json::Value> = all.iter().map(to_json).collect();
                spear_common::terminal::print_json(&serde_json::to_string_pretty(&rows)?);
                return Ok(0);
            }
            safe_println!(
                "{:<20} {:<9} {:<16} {:<16} {:<24} ARGUMENTS",
                "ID",
                "STATE",
                "NODE",
                "TASK",
                "SERVER/TOOL"
            );
            for a in &all {
                let b = a.binding.clone().unwrap_or_default();
                safe_println!(
                    "{:<20} {:<9} {:<16} {:<16} {:<24} {}",
                    printable(&a.approval_id),
                    state_name(a.state()),
                    printable(&b.node_id),
                    printable(&b.task_id),
                    printable(&format!("{}/{}", b.server_id, b.tool)),
                    spear_common::text::prefix(&b.arguments_digest, 12),
                );
            }
            Ok(0)
        }
        ApprovalsCommand::Show { client, id } => {
            let a = approvals(&client)
                .await?
                .show_approval(request(&client, ShowApprovalRequest { approval_id: id })?)
                .await
                .map_err(status_error)?
                .into_inner();
            let mut shown = to_json(&a);
            shown["arguments"] = match serde_json::from_str::<serde_json::Value>(&a.arguments) {
                Ok(value) => value,
                Err(_) => serde_json::Value::String(a.arguments.clone()),
            };
            spear_common::terminal::print_json(&serde_json::to_string_pretty(&shown)?);
            Ok(0)
        }
        ApprovalsCommand::Approve { client, id } => decide(&client, id, true, String::new()).await,
        ApprovalsCommand::Deny { client, id, reason } => decide(&client, id, false, reason).await,
    }
}

async fn decide(client: &ClientArgs, id: String, approve: bool, reason: String) -> Result<i32> {
    let answer = approvals(client)
        .await?
        .decide_approval(request(
            client,
            DecideApprovalRequest {
                approval_id: id.clone(),
                approve,
                reason,
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    let state = answer.approval.map_or("decided", |a| state_name(a.state()));
    safe_println!("approval {id}: {state}");
    Ok(0)
}
