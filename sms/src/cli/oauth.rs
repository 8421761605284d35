//! `sms oauth ...`: the cluster's OAuth credentials. `login` runs the
//! authorization-code flow on the operator's terminal (the browser comes
//! back to a loopback listener here, or the operator pastes where it
//! ended) and hands what it obtained to SMS, which seals it and renews it
//! from then on; `status` shows each credential's state, never a value.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use clap::Subcommand;
use spear_common::{safe_eprintln, safe_println};
use spear_oauth::{Authorizer, ClientConfig, LoginFlags};
use spear_proto::refs::substitute;
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{
    CredentialState, CredentialStatus, DeleteCredentialRequest, ListCredentialsRequest,
    ListServersRequest, OauthGrant, PutCredentialRequest, ServerSpec,
};

use super::client::{connect_sms, request, status_error};
use super::ClientArgs;
use crate::oauth::SealingKey;

#[derive(Debug, Subcommand)]
pub enum OAuthCommand {
    /// Make a key for sealing credentials at rest (give the file to every
    /// SMS replica with --oauth-key-file).
    Keygen {
        /// Where to write it (never over an existing file).
        file: PathBuf,
    },
    /// Log in to a server behind OAuth for the whole cluster: prints the
    /// authorization URL, waits for the browser to come back, and gives
    /// the tokens to SMS.
    Login {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        login: LoginFlags,
        /// The server id.
        server: String,
    },
    /// Each credential's state (no token is ever shown).
    Status(ClientArgs),
    /// Forget a server's credential.
    Logout {
        #[command(flatten)]
        client: ClientArgs,
        /// The server id.
        server: String,
    },
}

pub async fn run(command: OAuthCommand) -> Result<i32> {
    match command {
        OAuthCommand::Keygen { file } => {
            let key = SealingKey::generate(&file)?;
            safe_println!("wrote OAuth key {} to {}", key.id(), file.display());
            Ok(0)
        }
        OAuthCommand::Login {
            client,
            login,
            server,
        } => self::login(&client, &login, &server).await.map(|()| 0),
        OAuthCommand::Status(client) => status(&client).await,
        OAuthCommand::Logout { client, server } => {
            let mut sms = CredentialsClient::new(connect_sms(&client).await?);
            let existed = sms
                .delete_credential(request(
                    &client,
                    DeleteCredentialRequest {
                        server_id: server.clone(),
                    },
                )?)
                .await
                .map_err(status_error)?
                .into_inner()
                .existed;
            if existed {
                safe_println!("forgot the credential for {server}");
            } else {
                safe_println!("SMS held no credential for {server}");
            }
            Ok(0)
        }
    }
}

/// The registered server `id`, as an admin sees it.
async fn server_spec(client: &ClientArgs, id: &str) -> Result<ServerSpec> {
    let mut registry = RegistryClient::new(connect_sms(client).await?);
    let list = registry
        .list_servers(request(client, ListServersRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner();
    list.servers
        .into_iter()
        .filter_map(|r| r.spec)
        .find(|s| s.id == id)
        .ok_or_else(|| {
            anyhow!("there is no server '{id}' in the registry; `sms servers` lists them")
        })
}

async fn login(client: &ClientArgs, flags: &LoginFlags, id: &str) -> Result<()> {
    let spec = server_spec(client, id).await?;
    let auth = spec.auth.as_ref().ok_or_else(|| {
        anyhow!("server '{id}' has no \"auth\" in its server file: it needs no login")
    })?;
    let lookup = |name: &str| std::env::var(name).ok();
    let url = substitute(&spec.url, &lookup)
        .map_err(|e| anyhow!("server '{id}': url: {e} in this shell's environment"))?;
    let mut config = ClientConfig::from_environment(
        auth,
        &lookup,
        "this shell's environment; set it for the login",
    )
    .with_context(|| format!("server '{id}'"))?;
    // The operator's own terminal reaches what they point it at, as
    // `spearlet mcp` does; rmcp still checks the hosts metadata names.
    config.network = spear_oauth::Network::unguarded();
    if !config.grant.needs_login() {
        bail!("server '{id}' needs no login: SMS gets its tokens itself with its grant");
    }
    let authorizer = Authorizer::new(url, config, flags.redirect().await?, flags.browser());
    safe_eprintln!("logging in to {id}: open the address below in a browser and sign in");
    let manager = authorizer.authorize(None).await?;
    let held = spear_oauth::held(&manager).await?;
    let credentials_json = serde_json::to_string(&held)?;
    let mut sms = CredentialsClient::new(connect_sms(client).await?);
    let status = sms
        .put_credential(request(
            client,
            PutCredentialRequest {
                server_id: id.to_string(),
                credentials_json,
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner()
        .status
        .unwrap_or_default();
    safe_println!(
        "logged in to {id}: scopes [{}], access token {}, refresh token {}; SMS renews it from now on",
        status.scopes.join(" "),
        expiry(status.expires_at_ms),
        if status.has_refresh_token { "held" } else { "none (log in again when it expires)" }
    );
    Ok(())
}

async fn status(client: &ClientArgs) -> Result<i32> {
    let mut sms = CredentialsClient::new(connect_sms(client).await?);
    let list = sms
        .list_credentials(request(client, ListCredentialsRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner();
    if client.json {
        let json = serde_json::json!({
            "has_key": list.has_key,
            "key_id": list.key_id,
            "credentials": list.credentials.iter().map(as_json).collect::<Vec<_>>(),
        });
        spear_common::terminal::print_json(&serde_json::to_string_pretty(&json)?);
        return Ok(0);
    }
    if list.has_key {
        safe_println!("OAuth key: {}", list.key_id);
    } else {
        safe_println!("OAuth key: none (SMS holds no credentials; start it with --oauth-key-file)");
    }
    safe_println!(
        "{:<24} {:<14} {:<20} {:<16} {:<14} {:<24}  SCOPES",
        "SERVER",
        "STATE",
        "GRANT",
        "ACCESS TOKEN",
        "RENEWED",
        "LOGGED IN"
    );
    for c in &list.credentials {
        let logged_in = match (c.logged_in_at_ms, c.logged_in_by.as_str()) {
            (0, _) => "-".to_string(),
            (at, "") => ago(at),
            (at, by) => format!("{} by {by}", ago(at)),
        };
        let held = !matches!(
            CredentialState::try_from(c.state),
            Ok(CredentialState::NotLoggedIn | CredentialState::OnDemand)
        );
        safe_println!(
            "{:<24} {:<14} {:<20} {:<16} {:<14} {:<24}  {}",
            c.server_id,
            CredentialState::label_of(c.state),
            OauthGrant::label_of(c.grant),
            if held {
                expiry(c.expires_at_ms)
            } else {
                "-".to_string()
            },
            if c.refreshed_at_ms == 0 {
                "-".to_string()
            } else {
                ago(c.refreshed_at_ms)
            },
            logged_in,
            c.scopes.join(" ")
        );
        if !c.problem.is_empty() {
            safe_println!("  {}", c.problem);
        }
    }
    Ok(0)
}

fn as_json(c: &CredentialStatus) -> serde_json::Value {
    serde_json::json!({
        "server_id": c.server_id,
        "state": CredentialState::label_of(c.state),
        "grant": OauthGrant::label_of(c.grant),
        "scopes": c.scopes,
        "expires_at_ms": c.expires_at_ms,
        "refreshed_at_ms": c.refreshed_at_ms,
        "logged_in_at_ms": c.logged_in_at_ms,
        "logged_in_by": c.logged_in_by,
        "has_refresh_token": c.has_refresh_token,
        "problem": c.problem,
    })
}

fn since_epoch(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// `expires in 59m` / `expired 3s ago` / `no expiry`.
fn expiry(ms: u64) -> String {
    if ms == 0 {
        return "no expiry".into();
    }
    match since_epoch(ms).duration_since(SystemTime::now()) {
        Ok(left) => format!("expires in {}", short(left)),
        Err(past) => format!("expired {} ago", short(past.duration())),
    }
}

/// `3m ago`: how long since `ms` (milliseconds since the Unix epoch).
pub(super) fn ago(ms: u64) -> String {
    let past = SystemTime::now()
        .duration_since(since_epoch(ms))
        .unwrap_or_default();
    format!("{} ago", short(past))
}

fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}
