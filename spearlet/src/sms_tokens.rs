//! OAuth tokens from SMS, for the servers behind OAuth a cluster's nodes
//! use. Entry point: [`SmsCredentials`], the node's [`Credentials`]: SMS
//! holds one credential per server for the whole cluster and renews it;
//! a node asks SMS (over its mutual-TLS channel, as a node) for a current
//! access token, keeps it until it is due, and when its server refuses one
//! tells SMS which (by digest) so SMS renews it instead of handing it back.
//! The node never sees a refresh token and never logs in. For a server that
//! acts per principal, a person's session hands back their run's sealed
//! delegation with each request, and SMS answers with their token. The same link
//! asks SMS to open a server's sealed values (the literal `env` and
//! `headers` values of its file) when the node connects it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::{AccessTokenRequest, OpenSealedRequest, SealedValue};

use crate::mcp::{Challenge, Credentials, Delegation, TokenError, TokenSource};
use crate::sms_link::{Joined, LinkError, SmsLink};

/// A renewal at SMS may wait for another replica's; beyond this the
/// request fails and the connection retries later.
const ASK_TIMEOUT: Duration = Duration::from_secs(60);

/// Tokens for every protected server, from the SMS the node follows.
#[derive(Clone)]
pub struct SmsCredentials {
    sms: SmsLink,
}

impl SmsCredentials {
    pub fn new(sms: SmsLink) -> SmsCredentials {
        SmsCredentials { sms }
    }
}

#[async_trait::async_trait]
impl Credentials for SmsCredentials {
    fn tokens(&self, server_id: &str) -> Arc<dyn TokenSource> {
        Arc::new(SmsTokens {
            server_id: server_id.to_string(),
            sms: self.sms.clone(),
            held: Mutex::default(),
            delegation: None,
        })
    }

    /// SMS opens the delegation (sealed for this node and the run's time)
    /// and answers with that person's token.
    fn tokens_for(&self, server_id: &str, delegation: Delegation) -> Arc<dyn TokenSource> {
        Arc::new(SmsTokens {
            server_id: server_id.to_string(),
            sms: self.sms.clone(),
            held: Mutex::default(),
            delegation: Some(delegation),
        })
    }

    /// SMS opens them if the server is for this node and they are its
    /// current values; they are never kept beyond the connection.
    async fn open_sealed(
        &self,
        server_id: &str,
        sealed: &[SealedValue],
    ) -> Result<Vec<String>, TokenError> {
        let mut client = credentials(&self.sms)?;
        let request = OpenSealedRequest {
            server_id: server_id.to_string(),
            values: sealed.to_vec(),
        };
        let answer = tokio::time::timeout(ASK_TIMEOUT, client.open_sealed(request))
            .await
            .map_err(|_| TokenError(format!("SMS did not answer within {ASK_TIMEOUT:?}")))?
            .map_err(|status| from_sms(status, "its sealed values"))?;
        Ok(answer.into_inner().values)
    }
}

/// SMS's refusal as a sentence: its own, or why it was not reached.
fn from_sms(status: tonic::Status, what: &str) -> TokenError {
    use std::error::Error;
    if status.source().is_some() {
        TokenError(format!("cannot reach SMS for {what}: {}", status.message()))
    } else {
        // SMS's own sentence (not logged in, not for this node, ...).
        TokenError(status.message().to_string())
    }
}

/// The credentials client of the SMS the node follows, or why not.
fn credentials(sms: &SmsLink) -> Result<CredentialsClient<Joined>, TokenError> {
    sms.credentials().map_err(|e| match e {
        LinkError::NotConnected => TokenError(
            "this node has not reached SMS yet, which holds the server's OAuth credential and sealed values"
                .into(),
        ),
        other => TokenError(format!("cannot reach SMS for an OAuth token: {other}")),
    })
}

/// A token as SMS gave it, and when to ask again.
struct Held {
    token: String,
    due: Option<SystemTime>,
}

/// One server's tokens on this node.
struct SmsTokens {
    server_id: String,
    sms: SmsLink,
    held: Mutex<Option<Held>>,
    /// A person's session: their runs' delegation, sent with each request.
    delegation: Option<Delegation>,
}

impl SmsTokens {
    /// A token from SMS; `refused` is one the server would not take.
    async fn ask(&self, refused: Option<&str>) -> Result<String, TokenError> {
        let mut client = credentials(&self.sms)?;
        let request = AccessTokenRequest {
            server_id: self.server_id.clone(),
            refused_sha256: refused.map(spear_oauth::token_digest).unwrap_or_default(),
            delegation: self
                .delegation
                .as_ref()
                .map(|d| d.lock().clone())
                .unwrap_or_default(),
        };
        let answer = tokio::time::timeout(ASK_TIMEOUT, client.get_access_token(request))
            .await
            .map_err(|_| TokenError(format!("SMS gave no OAuth token within {ASK_TIMEOUT:?}")))?
            .map_err(|status| from_sms(status, "an OAuth token"))?
            .into_inner();
        let fetched = SystemTime::now();
        let due = (answer.expires_at_ms > 0).then(|| {
            let expires = SystemTime::UNIX_EPOCH + Duration::from_millis(answer.expires_at_ms);
            spear_oauth::renew_at(fetched, expires)
        });
        *self.held.lock() = Some(Held {
            token: answer.access_token.clone(),
            due,
        });
        Ok(answer.access_token)
    }
}

#[async_trait::async_trait]
impl TokenSource for SmsTokens {
    async fn token(&self) -> Result<Option<String>, TokenError> {
        let now = SystemTime::now();
        let kept = self.held.lock().as_ref().and_then(|held| {
            let fresh = held.due.is_none_or(|due| now < due);
            fresh.then(|| held.token.clone())
        });
        match kept {
            Some(token) => Ok(Some(token)),
            None => self.ask(None).await.map(Some),
        }
    }

    async fn challenged(
        &self,
        sent: Option<&str>,
        challenge: &Challenge,
    ) -> Result<Option<String>, TokenError> {
        match challenge {
            Challenge::Unauthorized(_) => {
                let fresh = self.ask(sent).await?;
                Ok((Some(fresh.as_str()) != sent).then_some(fresh))
            }
            Challenge::InsufficientScope(header) => Err(TokenError(format!(
                "{}; add it to auth.scopes in the server's file and run `sms oauth login {}` again",
                crate::mcp::insufficient_scope(header),
                self.server_id
            ))),
        }
    }
}
