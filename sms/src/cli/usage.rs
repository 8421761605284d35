//! `sms usage`: what tasks, people, servers and tools used, totalled by SMS
//! from the audit trail (docs/usage.md).

use anyhow::Result;
use clap::Args;
use spear_common::{safe_eprintln, safe_println};
use spear_identity::Identity;
use spear_proto::v1::audit_client::AuditClient;
use spear_proto::v1::UsageRequest;

use super::client::{connect, request, status_error};
use super::ClientArgs;

#[derive(Debug, Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only this task's runs.
    #[arg(long, default_value = "")]
    pub task: String,
    /// Only the runs of this principal: `<issuer>#<subject>`, or an admin's
    /// name (`admin/ops`), as records name them.
    #[arg(long, default_value = "")]
    pub principal: String,
    /// Only tool calls to this server (model requests belong to none).
    #[arg(long, default_value = "")]
    pub server: String,
    /// Only calls of this tool.
    #[arg(long, default_value = "")]
    pub tool: String,
    /// Only the last so long: `90s`, `30m`, `1h` (default: all SMS keeps).
    #[arg(long, value_parser = super::nodes::seconds)]
    pub since: Option<u64>,
}

pub async fn run(args: UsageArgs) -> Result<i32> {
    let UsageArgs {
        client,
        task,
        principal,
        server,
        tool,
        since,
    } = args;
    let since_ms = since.map_or(0, |secs| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        now.saturating_sub(secs.saturating_mul(1000))
    });
    let channel = connect(&client, &client.addr, Identity::Sms, "SMS").await?;
    let totals = AuditClient::new(channel)
        .usage(request(
            &client,
            UsageRequest {
                task_id: task,
                principal,
                server_id: server,
                tool,
                since_ms,
                bucket_ms: 0,
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    let runs = totals.runs;
    let used = totals.used.unwrap_or_default();
    let cost = used.cost_nano_usd as f64 / 1e9;
    if client.json {
        let mut out = super::tasks::usage_json(used);
        out["runs"] = runs.into();
        spear_common::terminal::print_json(&out.to_string());
        return Ok(0);
    }
    safe_println!("runs            {runs}");
    safe_println!("model requests  {}", used.model_requests);
    safe_println!("input tokens    {}", used.input_tokens);
    safe_println!("output tokens   {}", used.output_tokens);
    safe_println!("tool calls      {}", used.tool_calls);
    safe_println!("cost            ${cost:.6}");
    if used.unpriced_model_requests > 0 {
        safe_eprintln!(
            "{} model requests were of models the nodes' [llm.prices] do not price; their cost is not counted",
            used.unpriced_model_requests
        );
    }
    Ok(0)
}
