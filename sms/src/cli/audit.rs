//! `sms audit`: the nodes' audit records, filtered, and `sms audit verify`,
//! which checks every node's chain (docs/trust.md).

use anyhow::Result;
use clap::{Args, Subcommand};
use spear_common::text::printable;
use spear_common::{safe_eprintln, safe_println};
use spear_identity::Identity;
use spear_proto::audit::{Outcome, Record};
use spear_proto::v1::audit_client::AuditClient;
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{QueryAuditRequest, VerifyAuditRequest, WatchTrustRequest};
use tonic::transport::Channel;

use super::client::{connect, request, status_error};
use super::ClientArgs;

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub filter: AuditFilter,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every node's chain; names the first gap or altered record.
    /// Exits 1 when one is not whole.
    Verify(ClientArgs),
    /// End a dispute over one seq of a node's chain (two copies offered
    /// under its name), keeping the copy whose SHA-256 is given.
    Resolve(super::audit_disputes::ResolveArgs),
}

#[derive(Debug, Args, Default)]
pub struct AuditFilter {
    /// Only this task's records.
    #[arg(long)]
    pub task: Option<String>,
    /// Only this node's records (`sms`: SMS's own, the admin writes).
    #[arg(long)]
    pub node: Option<String>,
    /// Only calls of this MCP server's tools.
    #[arg(long)]
    pub server: Option<String>,
    /// Only this tool's records.
    #[arg(long)]
    pub tool: Option<String>,
    /// One of: run, failed, denied, held, waiting, approved,
    /// approval_denied, expired, budget, answered, pinned, drift.
    #[arg(long)]
    pub outcome: Option<String>,
    /// Only records this recent: a number of seconds, minutes or hours
    /// (`90s`, `15m`, `2h`).
    #[arg(long)]
    pub since: Option<String>,
    /// Most records to print.
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
}

pub(super) async fn audit(client: &ClientArgs) -> Result<AuditClient<Channel>> {
    Ok(AuditClient::new(
        connect(client, &client.addr, Identity::Sms, "SMS").await?,
    ))
}

/// Says on stderr which approvals a run of `task` (on `node`, when one is
/// named) waits for, as SMS announces them on `channel` (the invocation's
/// own connection), and how each was decided,
/// until the returned task is aborted. `None` when SMS's trust events
/// cannot be followed (a caller who is not an admin): the run goes on
/// without the notices.
pub async fn announce_waits(
    client: &ClientArgs,
    channel: Channel,
    task: String,
    node: String,
) -> Option<tokio::task::JoinHandle<()>> {
    let mut events = AuditClient::new(channel)
        .watch_trust(request(client, WatchTrustRequest {}).ok()?)
        .await
        .ok()?
        .into_inner();
    Some(tokio::spawn(async move {
        while let Ok(Some(event)) = events.message().await {
            let Some(Event::Approval(a)) = event.event else {
                continue;
            };
            let b = a.binding.clone().unwrap_or_default();
            if b.task_id != task || (!node.is_empty() && b.node_id != node) {
                continue;
            }
            let state = crate::approvals::state_name(a.state());
            let id = spear_common::text::printable(&a.approval_id).into_owned();
            let what = spear_common::text::printable(&format!(
                "{} · {} on {}",
                b.server_id, b.tool, b.node_id
            ))
            .into_owned();
            if state == "pending" {
                let left = a
                    .expires_at_ms
                    .saturating_sub(spear_common::clock::now_ms())
                    / 1000;
                safe_eprintln!(
                    "waiting for approval {id} of {what} (expires in {left} s): `sms approvals show {id}`, then approve or deny"
                );
            } else {
                safe_eprintln!("approval {id} of {what}: {state}");
            }
        }
    }))
}

/// `90s`, `15m`, `2h` in milliseconds.
fn parse_since(text: &str) -> Result<u64> {
    let seconds = super::nodes::seconds(text).map_err(|why| anyhow::anyhow!("--since {why}"))?;
    Ok(spear_common::clock::now_ms().saturating_sub(seconds.saturating_mul(1000)))
}

pub async fn run(args: AuditArgs) -> Result<i32> {
    match args.command {
        Some(AuditCommand::Verify(client)) => verify(&client).await,
        Some(AuditCommand::Resolve(args)) => super::audit_disputes::resolve(args).await,
        None => query(&args.client, args.filter).await,
    }
}

async fn query(client: &ClientArgs, filter: AuditFilter) -> Result<i32> {
    if let Some(outcome) = &filter.outcome {
        if Outcome::parse(outcome).is_none() {
            anyhow::bail!(
                "--outcome '{outcome}' is not an outcome; use one of {}",
                Outcome::NAMES.join(", ")
            );
        }
    }
    let since_ms = filter
        .since
        .as_deref()
        .map(parse_since)
        .transpose()?
        .unwrap_or(0);
    let answer = audit(client)
        .await?
        .query_audit(request(
            client,
            QueryAuditRequest {
                task_id: filter.task.unwrap_or_default(),
                node_id: filter.node.unwrap_or_default(),
                server_id: filter.server.unwrap_or_default(),
                tool: filter.tool.unwrap_or_default(),
                outcome: filter.outcome.unwrap_or_default(),
                since_ms,
                limit: filter.limit,
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    if client.json {
        for line in &answer.records {
            spear_common::terminal::print_json(&line.json);
        }
    } else {
        safe_println!(
            "{:<16} {:>6} {:<13} {:<16} {:<16} {:<24} {:<15} RULE",
            "NODE",
            "SEQ",
            "KIND",
            "TASK",
            "INVOCATION",
            "SERVER/TOOL",
            "OUTCOME"
        );
        for (i, (line, node)) in answer.records.iter().zip(&answer.nodes).enumerate() {
            let r: Record = serde_json::from_str(&line.json).unwrap_or_default();
            let target = match (r.server.as_str(), r.tool.as_str(), r.model.as_str()) {
                ("", "", "") => String::new(),
                ("", "", model) => format!("{}/{model}", r.backend),
                (server, tool, _) => format!("{server}/{tool}"),
            };
            safe_println!(
                "{:<16} {:>6} {:<13} {:<16} {:<16} {:<24} {:<15} {}",
                printable(node),
                super::audit_disputes::seq_label(&answer, i, line.seq),
                r.kind.name(),
                printable(&r.task),
                printable(spear_common::text::prefix(&r.invocation, 16)),
                printable(&target),
                r.outcome.name(),
                printable(&r.rule),
            );
        }
    }
    super::audit_disputes::say_disputes(&answer);
    if answer.left_out > 0 {
        safe_eprintln!(
            "{} more records match; narrow the filters or raise --limit",
            answer.left_out
        );
    }
    Ok(0)
}

/// `; reset at seq 42 (…)`: where a node lost its own log and went on
/// from SMS's copy. Named, as the chain is whole across it.
fn resets(seqs: &[u64]) -> String {
    if seqs.is_empty() {
        return String::new();
    }
    let list: Vec<String> = seqs.iter().map(u64::to_string).collect();
    format!(
        "; reset at seq {} (the node's own audit log was lost there; records it wrote before are only in SMS's copy)",
        list.join(", ")
    )
}

async fn verify(client: &ClientArgs) -> Result<i32> {
    let answer = audit(client)
        .await?
        .verify_audit(request(client, VerifyAuditRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner();
    let mut whole = true;
    for chain in &answer.chains {
        if chain.problem.is_empty() {
            safe_println!(
                "node {}: {} records, {} to {}, chain whole{}",
                chain.node_id,
                chain.records,
                chain.first_seq,
                chain.last_seq,
                resets(&chain.resets)
            );
        } else {
            whole = false;
            safe_println!("node {}: NOT WHOLE: {}", chain.node_id, chain.problem);
        }
    }
    if answer.chains.is_empty() {
        safe_println!("no audit records yet");
    }
    Ok(if whole { 0 } else { 1 })
}

/// `sms events`: approvals, drift and new audit records as they happen,
/// one JSON object per line, until interrupted.
pub async fn follow(client: &ClientArgs) -> Result<i32> {
    let mut events = audit(client)
        .await?
        .watch_trust(request(client, WatchTrustRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner();
    safe_eprintln!("watching trust events on {}", client.addr);
    while let Some(event) = events.message().await.map_err(status_error)? {
        let line = match event.event {
            Some(Event::Approval(a)) => {
                let b = a.binding.clone().unwrap_or_default();
                serde_json::json!({"approval": {
                    "id": a.approval_id, "state": crate::approvals::state_name(a.state()),
                    "node": b.node_id, "task": b.task_id, "server": b.server_id, "tool": b.tool,
                    "reason": a.reason, "decided_by": a.decided_by}})
            }
            Some(Event::Drift(d)) => serde_json::json!({"drift": {
                "server": d.server_id, "node": d.node_id, "tools": d.tools}}),
            Some(Event::Audit(e)) => {
                let record: serde_json::Value = e
                    .record
                    .map(|r| serde_json::from_str(&r.json).unwrap_or_default())
                    .unwrap_or_default();
                serde_json::json!({"audit": record})
            }
            Some(Event::Lagged(missed)) => serde_json::json!({"lagged": missed}),
            None => continue,
        };
        spear_common::terminal::print_json(&line.to_string());
    }
    Ok(0)
}
