//! The node's own credential on a plaintext plane (docs/security.md,
//! "Node credentials"). Entry point: [`resolve`].
//!
//! `--join-token-file` holds what the operator gave the node:
//! - a **join token** (`sms nodes join-token NODE`): single use. The node
//!   presents it once (`Nodes.Join`, with no credential yet) and keeps the
//!   node token SMS answers in `<state dir>/node-token` (0600), which it
//!   presents from then on, across restarts; the spent join token is not
//!   read again.
//! - a **node token** (from an earlier join, copied by the operator):
//!   presented as it is.
//!
//! On TLS the certificate is the node's credential and the file is not
//! used.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spear_identity::{is_join_token, node_token_id, JoinToken};
use spear_proto::v1::JoinRequest;

use crate::sms_link::SmsLink;

/// The node token SMS gave at the join, in the state dir.
pub const NODE_TOKEN_FILE: &str = "node-token";

/// How long a node tries to reach SMS to join before giving up (its
/// supervisor starts it again).
const JOIN_WITHIN: Duration = Duration::from_secs(30);

/// Why the node has no credential.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("--join-token-file holds neither a join token nor a node token; make one with `sms nodes join-token {0}` (SMS's own secret is never a node's)")]
    NotAToken(String),
    #[error("the node token in {path} is for node '{token}', not '{node}'; give this node its own join token (`sms nodes join-token {node}`)")]
    OtherNode {
        path: PathBuf,
        token: String,
        node: String,
    },
    #[error("SMS refused the join token: {0}")]
    Refused(String),
    #[error("could not reach SMS to join within {JOIN_WITHIN:?} ({0}); the join token is unspent, start the node again")]
    Unreachable(String),
    #[error("cannot keep the node token in {path}: {cause}")]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] spear_identity::TokenError),
}

/// Puts the node's own credential in `config` ([`resolve`]).
pub async fn adopt(config: &mut super::NodeConfig, node_id: &str) -> Result<(), CredentialError> {
    config.join_token = resolve(
        config.join_token.clone(),
        config.tls.is_some(),
        &config.sms,
        &config.state_dir,
        node_id,
    )
    .await?;
    Ok(())
}

/// The credential the node presents: its stored node token, the file's
/// node token, or the node token a join gives; none on TLS, and `given`
/// unchanged when no file was given.
pub async fn resolve(
    given: JoinToken,
    tls: bool,
    sms: &[String],
    state_dir: &Path,
    node_id: &str,
) -> Result<JoinToken, CredentialError> {
    let stored = state_dir.join(NODE_TOKEN_FILE);
    if tls {
        // The certificate speaks for the node: a (spent) join token is
        // not sent anywhere.
        return Ok(JoinToken::none());
    }
    if stored.exists() {
        let token = JoinToken::from_file(stored.clone())?;
        return checked(token, &stored, node_id);
    }
    let Some(held) = given.secret() else {
        return Ok(given);
    };
    if node_token_id(&held).is_some() {
        return checked(given, Path::new("--join-token-file"), node_id);
    }
    if !is_join_token(&held) {
        return Err(CredentialError::NotAToken(node_id.to_string()));
    }
    let Joined::NodeToken(node_token) = join(sms, None, node_id, held, String::new()).await? else {
        return Err(CredentialError::Refused(
            "SMS answered with a certificate where a node token was asked".into(),
        ));
    };
    write_private(&stored, &node_token)?;
    tracing::info!(node_id, path = %stored.display(), "joined SMS: kept the node's own token");
    Ok(JoinToken::from_file(stored)?)
}

fn checked(token: JoinToken, path: &Path, node_id: &str) -> Result<JoinToken, CredentialError> {
    let held = token.secret().unwrap_or_default();
    match node_token_id(&held) {
        Some(id) if id == node_id => Ok(token),
        Some(id) => Err(CredentialError::OtherNode {
            path: path.to_path_buf(),
            token: id.to_string(),
            node: node_id.to_string(),
        }),
        None => Err(CredentialError::NotAToken(node_id.to_string())),
    }
}

/// What a join gives.
pub(super) enum Joined {
    /// On plaintext: the node's own token.
    NodeToken(String),
    /// On TLS, with a certificate request: the node's certificate (PEM).
    Certificate(String),
}

/// Presents the join token (and, on TLS, the certificate request
/// `csr_pem`) to each SMS in turn until one answers.
pub(super) async fn join(
    sms: &[String],
    tls: Option<spear_identity::TlsIdentity>,
    node_id: &str,
    join_token: String,
    csr_pem: String,
) -> Result<Joined, CredentialError> {
    // No credential yet: the join call carries none.
    let link = SmsLink::new(sms.to_vec(), tls, JoinToken::none());
    let mut backoff =
        spear_common::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    let deadline = tokio::time::Instant::now() + JOIN_WITHIN;
    let mut last = String::from("no SMS address");
    loop {
        for addr in sms {
            let channel = match link.connect(addr).await {
                Ok(channel) => channel,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            link.follow(addr, channel);
            let Ok(mut client) = link.nodes() else {
                continue;
            };
            let asked = JoinRequest {
                node_id: node_id.to_string(),
                join_token: join_token.clone(),
                csr_pem: csr_pem.clone(),
            };
            match client.join(asked).await {
                Ok(answer) => {
                    let answer = answer.into_inner();
                    return Ok(if answer.certificate_pem.is_empty() {
                        Joined::NodeToken(answer.node_token)
                    } else {
                        Joined::Certificate(answer.certificate_pem)
                    });
                }
                Err(status) if status.code() == tonic::Code::Unavailable => {
                    last = status.message().to_string();
                }
                Err(status) => return Err(CredentialError::Refused(status.message().to_string())),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CredentialError::Unreachable(last));
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Writes `text` to `path`, readable by the node's user only, whole or
/// not at all.
pub(super) fn write_private(path: &Path, text: &str) -> Result<(), CredentialError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |cause| CredentialError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let partial = path.with_extension("partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&partial, path).map_err(failed)
}
