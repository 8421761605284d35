//! `sms nodes join-token NODE`: one node's one-time join token
//! (docs/security.md, "Node credentials").

use anyhow::{bail, Result};
use clap::Subcommand;
use spear_common::{safe_eprintln, safe_println};
use spear_identity::Identity;
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::MintJoinTokenRequest;

use super::client::{connect, request, status_error};
use super::ClientArgs;

#[derive(Debug, Subcommand)]
pub enum NodesCommand {
    /// Make a join token for one node: it works once, for that node id
    /// only, within --ttl. Give it to the node as --join-token-file; the
    /// node exchanges it for its own credential (admin).
    JoinToken {
        #[command(flatten)]
        client: ClientArgs,
        /// The node's id (its --node-id).
        node: String,
        /// How long it may wait to be used: `90s`, `30m`, `1h` (at most `24h`).
        #[arg(long, default_value = "1h", value_parser = seconds)]
        ttl: u64,
    },
}

/// A duration the CLI could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a duration; write e.g. 90s, 30m or 1h")]
pub(super) struct NotADuration(String);

/// `90s`, `30m`, `1h`, or a number of seconds (also `sms audit --since`).
pub(super) fn seconds(text: &str) -> Result<u64, NotADuration> {
    let (number, unit) = match text.char_indices().last() {
        Some((i, 's')) => (&text[..i], 1),
        Some((i, 'm')) => (&text[..i], 60),
        Some((i, 'h')) => (&text[..i], 3600),
        _ => (text, 1),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|s| *s > 0)
        .ok_or_else(|| NotADuration(text.to_string()))
}

pub async fn run(command: NodesCommand) -> Result<i32> {
    match command {
        NodesCommand::JoinToken { client, node, ttl } => {
            if ttl > spear_identity::MAX_JOIN_TTL_S {
                bail!(
                    "--ttl is at most 24h: a join token is meant to be used soon after it is made"
                );
            }
            let channel = connect(&client, &client.addr, Identity::Sms, "SMS").await?;
            let minted = NodesClient::new(channel)
                .mint_join_token(request(
                    &client,
                    MintJoinTokenRequest {
                        node_id: node.clone(),
                        ttl_s: ttl,
                    },
                )?)
                .await
                .map_err(status_error)?
                .into_inner();
            if client.json {
                let out = serde_json::json!({"node": node, "join_token": minted.join_token,
                                             "expires_unix": minted.expires_unix});
                spear_common::terminal::print_json(&out.to_string());
            } else {
                // The token alone on stdout, so `> FILE` makes the node's file.
                safe_println!("{}", minted.join_token);
                safe_eprintln!(
                    "a join token for node '{node}': it works once, within {ttl} s; give it to the node as --join-token-file"
                );
            }
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_as_operators_write_them() {
        assert_eq!(super::seconds("90s"), Ok(90));
        assert_eq!(super::seconds("30m"), Ok(1800));
        assert_eq!(super::seconds("1h"), Ok(3600));
        assert_eq!(super::seconds("120"), Ok(120));
        assert!(super::seconds("0s").is_err());
        assert!(super::seconds("soon").is_err());
    }
}
