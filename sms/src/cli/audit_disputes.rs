//! Disputed seqs in `sms audit`: where SMS holds more than one copy of a
//! node's record (docs/trust.md, "Disputes"), the listing says so, and
//! `sms audit resolve` keeps the true copy.

use anyhow::Result;
use clap::Args;
use spear_common::text::printable;
use spear_common::{safe_eprintln, safe_println};
use spear_proto::v1::{QueryAuditResponse, ResolveAuditRequest};

use super::client::{request, status_error};
use super::ClientArgs;

#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The node whose chain has the disputed seq.
    #[arg(long)]
    pub node: String,
    /// The disputed seq (`sms audit verify` names them).
    #[arg(long)]
    pub seq: u64,
    /// The SHA-256 of the copy to keep, as `sms audit --node <node>` shows it.
    #[arg(long)]
    pub keep: String,
}

/// `seq` as the listing shows record `i`: `12`, or `12~1` for copy 1 of
/// a disputed seq 12.
pub fn seq_label(answer: &QueryAuditResponse, i: usize, seq: u64) -> String {
    match answer.sha256.get(i).is_some_and(|s| !s.is_empty()) {
        true => format!("{seq}~{}", answer.copies.get(i).copied().unwrap_or(0)),
        false => seq.to_string(),
    }
}

/// Names every disputed seq in `answer` on stderr, with each copy's
/// SHA-256 and the command that ends the dispute.
pub fn say_disputes(answer: &QueryAuditResponse) {
    let disputed = answer
        .records
        .iter()
        .zip(&answer.nodes)
        .zip(answer.copies.iter().zip(&answer.sha256))
        .filter(|(_, (_, sha))| !sha.is_empty());
    for ((line, node), (copy, sha)) in disputed {
        let node = printable(node);
        let held = if *copy == 0 {
            " (the one in the chain)"
        } else {
            ""
        };
        safe_eprintln!(
            "disputed: node {node} seq {} copy {copy}{held} has SHA-256 {sha}; keep the true copy with `sms audit resolve --node {node} --seq {} --keep <sha256>`",
            line.seq, line.seq
        );
    }
}

pub async fn resolve(args: ResolveArgs) -> Result<i32> {
    let client = &args.client;
    let answer = super::audit::audit(client)
        .await?
        .resolve_audit(request(
            client,
            ResolveAuditRequest {
                node_id: args.node.clone(),
                seq: args.seq,
                keep_sha256: args.keep.clone(),
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    let node = printable(&args.node);
    let what = match answer.replaced {
        true => "the kept copy is now the chain's",
        false => "the chain's copy stays",
    };
    safe_println!(
        "node {node} seq {}: resolved, {what}; {} other copies dropped",
        args.seq,
        answer.dropped
    );
    Ok(0)
}
