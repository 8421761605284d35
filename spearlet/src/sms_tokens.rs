//! OAuth tokens from SMS, for the servers behind OAuth a cluster's nodes
//! use. Entry point: [`SmsCredentials`], the node's [`Credentials`]: SMS
//! holds one credential per server for the whole cluster and renews it;
//! a node asks SMS (over its mutual-TLS channel, as a node) for a current
//! access token, keeps it until it is due, and when its server refuses one
//! tells SMS which (by digest) so SMS renews it instead of handing it back.
//! The node never sees a refresh token and never logs in. The same link
//! asks SMS to open a server's sealed values (the literal `env` and
//! `headers` values of its file) when the node connects it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use spear_identity::{dial, Identity, JoinToken, TlsIdentity};
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::{AccessTokenRequest, OpenSealedRequest, SealedValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::mcp::{Challenge, Credentials, TokenError, TokenSource};
use crate::sync::SyncStatusCell;

/// A renewal at SMS may wait for another replica's; beyond this the
/// request fails and the connection retries later.
const ASK_TIMEOUT: Duration = Duration::from_secs(60);

/// Tokens for every protected server, from the SMS the node syncs with.
#[derive(Clone)]
pub struct SmsCredentials {
    sms: Arc<SmsLink>,
}

/// The channel to SMS, redialled when the sync loop moves to another one.
struct SmsLink {
    status: Arc<SyncStatusCell>,
    tls: Option<TlsIdentity>,
    join: JoinToken,
    channel: Mutex<Option<(String, Channel)>>,
}

impl SmsCredentials {
    pub fn new(
        status: Arc<SyncStatusCell>,
        tls: Option<TlsIdentity>,
        join: JoinToken,
    ) -> SmsCredentials {
        SmsCredentials {
            sms: Arc::new(SmsLink {
                status,
                tls,
                join,
                channel: Mutex::default(),
            }),
        }
    }
}

#[async_trait::async_trait]
impl Credentials for SmsCredentials {
    fn tokens(&self, server_id: &str) -> Arc<dyn TokenSource> {
        Arc::new(SmsTokens {
            server_id: server_id.to_string(),
            sms: Arc::clone(&self.sms),
            held: Mutex::default(),
        })
    }

    /// SMS opens them if the server is for this node and they are its
    /// current values; they are never kept beyond the connection.
    async fn open_sealed(
        &self,
        server_id: &str,
        sealed: &[SealedValue],
    ) -> Result<Vec<String>, TokenError> {
        let mut client = self.sms.client()?;
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

impl SmsLink {
    fn client(
        &self,
    ) -> Result<CredentialsClient<InterceptedService<Channel, JoinToken>>, TokenError> {
        let addr = self.status.status.lock().sms.clone().ok_or_else(|| {
            TokenError(
                "this node has not reached SMS yet, which holds the server's OAuth credential and sealed values"
                    .into(),
            )
        })?;
        let mut cached = self.channel.lock();
        if let Some((at, channel)) = cached.as_ref() {
            if *at == addr {
                return Ok(CredentialsClient::with_interceptor(
                    channel.clone(),
                    self.join.clone(),
                ));
            }
        }
        let (endpoint, dialer) = dial(&addr, self.tls.as_ref(), Identity::Sms).map_err(|e| {
            TokenError(format!("cannot dial SMS at {addr} for an OAuth token: {e}"))
        })?;
        let channel = dialer.connect_lazy(endpoint.connect_timeout(Duration::from_secs(5)));
        *cached = Some((addr, channel.clone()));
        Ok(CredentialsClient::with_interceptor(
            channel,
            self.join.clone(),
        ))
    }
}

/// A token as SMS gave it, and when to ask again.
struct Held {
    token: String,
    due: Option<SystemTime>,
}

/// One server's tokens on this node.
struct SmsTokens {
    server_id: String,
    sms: Arc<SmsLink>,
    held: Mutex<Option<Held>>,
}

impl SmsTokens {
    /// A token from SMS; `refused` is one the server would not take.
    async fn ask(&self, refused: Option<&str>) -> Result<String, TokenError> {
        let mut client = self.sms.client()?;
        let request = AccessTokenRequest {
            server_id: self.server_id.clone(),
            refused_sha256: refused.map(spear_oauth::token_digest).unwrap_or_default(),
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
