//! The node's one link to SMS, cloned into everything that talks to it
//! (registry sync, heartbeats, task fetches, OAuth tokens and sealed
//! values, the revocation list), as kube's one `Client` is cloned into
//! every `Api`. It owns the configured addresses, which of them the node
//! follows now (the sync loop moves it), one channel to that address
//! shared by every client, the node's TLS identity and join token, and
//! the connect timeout; it hands out typed clients.
//!
//! Channels are lazy: a broken connection is dialled again on the next
//! request, and a move to another SMS replaces the shared channel at once.
//!
//! The link also holds the node's latest report ([`SmsLink::report`]):
//! the sync loop's follow stream carries it to SMS whenever it changed,
//! so a node that follows SMS makes no heartbeat calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use spear_identity::{dial, BadAddress, Identity, JoinToken, Renewed, TlsIdentity};
use spear_proto::v1::approvals_client::ApprovalsClient;
use spear_proto::v1::audit_client::AuditClient;
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::pins_client::PinsClient;
use spear_proto::v1::quotas_client::QuotasClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::revocations_client::RevocationsClient;
use spear_proto::v1::tasks_client::TasksClient;
use spear_proto::v1::HeartbeatRequest;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// How long a connection to SMS may take to open, TLS included.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The node pings SMS after reading nothing from it for this long, and
/// calls the connection dead when the answer takes longer than
/// [`PING_ANSWER_WITHIN`]. SMS's progress frames (every 60 s by default)
/// come sooner, so a healthy SMS is never pinged (each ping would cost
/// SMS as much as a frame). The ping finds an SMS whose process stopped
/// answering; one whose host went away is found sooner, by the
/// connection's TCP keepalive (`spear_identity`'s dialler).
pub const PING_AFTER: Duration = Duration::from_secs(80);
pub const PING_ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// A channel that presents the node's join token on every request.
pub type Joined = InterceptedService<Channel, JoinToken>;

/// Why no client could be had.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("this node has not reached SMS yet")]
    NotConnected,
    #[error(transparent)]
    Address(#[from] BadAddress),
    #[error("cannot connect to SMS at {addr}: {why}")]
    Connect {
        addr: String,
        why: String,
        /// Refused: nothing listens there (SMS not running, or
        /// restarting); the sync loop retries those sooner.
        nobody_listening: bool,
    },
}

/// The node's link to SMS; see the module docs.
#[derive(Clone)]
pub struct SmsLink {
    inner: Arc<Inner>,
}

struct Inner {
    addrs: Vec<String>,
    tls: Option<TlsIdentity>,
    join: JoinToken,
    /// The SMS followed now, and the channel every client shares to it.
    current: Mutex<Option<(String, Channel)>>,
    /// The node's latest report, for the follow stream.
    report: watch::Sender<Option<HeartbeatRequest>>,
    /// The SMS followed now takes reports on the follow stream (one from
    /// before it takes heartbeat calls instead).
    carried: AtomicBool,
}

impl SmsLink {
    /// What to check when a connection to SMS broke before any answer:
    /// most often plaintext against a TLS port, or a certificate the other
    /// side refused.
    pub fn dial_hint(&self) -> &'static str {
        if self.inner.tls.is_some() {
            "check that SMS's certificate chains to --tls-ca and that the node's certificate is valid and from the same CA"
        } else {
            "if SMS serves TLS, give the node --tls-ca (SMS's CA) with its certificate, or with a join token"
        }
    }

    pub fn new(addrs: Vec<String>, tls: Option<TlsIdentity>, join: JoinToken) -> SmsLink {
        SmsLink {
            inner: Arc::new(Inner {
                addrs,
                tls,
                join,
                current: Mutex::new(None),
                report: watch::channel(None).0,
                carried: AtomicBool::new(false),
            }),
        }
    }

    /// The configured SMS addresses, in the operator's order.
    pub fn addrs(&self) -> &[String] {
        &self.inner.addrs
    }

    /// The address the node follows now.
    pub fn current(&self) -> Option<String> {
        self.inner.current.lock().as_ref().map(|(a, _)| a.clone())
    }

    /// The current SMS first, then every configured one: where to ask
    /// for something SMS has (a task).
    pub fn candidates(&self) -> Vec<String> {
        let current = self.current();
        let others = self
            .inner
            .addrs
            .iter()
            .filter(|a| Some(*a) != current.as_ref());
        current.iter().chain(others).cloned().collect()
    }

    /// Connects to `addr` now (the sync loop, which must know at once).
    pub async fn connect(&self, addr: &str) -> Result<Channel, LinkError> {
        let (endpoint, dialer) = dial(addr, self.inner.tls.as_ref(), Identity::Sms)?;
        let endpoint = endpoint
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(PING_AFTER)
            .keep_alive_timeout(PING_ANSWER_WITHIN);
        dialer
            .connect(endpoint)
            .await
            .map_err(|e| LinkError::Connect {
                addr: addr.to_string(),
                why: spear_common::text::causes(&e),
                nobody_listening: nobody_listening(&e),
            })
    }

    /// Renews the node's TLS session ticket for the SMS it follows (the
    /// sync loop's `tickets.rs` says when and why). `Ok(None)` in
    /// plaintext or while the node follows no SMS.
    pub async fn renew_ticket(&self) -> Result<Option<Renewed>, LinkError> {
        let Some(addr) = self.current() else {
            return Ok(None);
        };
        let (endpoint, dialer) = dial(&addr, self.inner.tls.as_ref(), Identity::Sms)?;
        let renewed = tokio::time::timeout(CONNECT_TIMEOUT, dialer.renew_ticket(&endpoint))
            .await
            .unwrap_or_else(|_| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no TLS handshake within {CONNECT_TIMEOUT:?}"),
                ))
            });
        renewed.map_err(|e| LinkError::Connect {
            why: spear_common::text::causes(&e),
            nobody_listening: nobody_listening(&e),
            addr,
        })
    }

    /// From now on the node follows `addr`, over `channel`, and every
    /// client shares it.
    pub fn follow(&self, addr: &str, channel: Channel) {
        *self.inner.current.lock() = Some((addr.to_string(), channel));
    }

    /// Makes `report` the node's latest; the follow stream sends it if it
    /// differs from the last. `true`: the SMS followed now takes reports
    /// that way, so no heartbeat call is needed.
    pub fn report(&self, report: HeartbeatRequest) -> bool {
        self.inner.report.send_if_modified(|latest| {
            let changed = latest.as_ref() != Some(&report);
            if changed {
                *latest = Some(report);
            }
            changed
        });
        self.inner.carried.load(Ordering::Relaxed)
    }

    /// The node's latest report and its changes (the follow stream's).
    pub fn reports(&self) -> watch::Receiver<Option<HeartbeatRequest>> {
        self.inner.report.subscribe()
    }

    /// Whether the SMS followed now takes reports on the follow stream.
    pub fn set_carried(&self, carried: bool) {
        self.inner.carried.store(carried, Ordering::Relaxed);
    }

    /// The shared channel to the SMS followed now.
    fn channel(&self) -> Result<Channel, LinkError> {
        match self.inner.current.lock().as_ref() {
            Some((_, channel)) => Ok(channel.clone()),
            None => Err(LinkError::NotConnected),
        }
    }

    fn joined(&self, channel: Channel) -> Joined {
        InterceptedService::new(channel, self.inner.join.clone())
    }

    /// The registry watch over `channel` (the sync loop's own).
    pub fn registry(&self, channel: Channel) -> RegistryClient<Joined> {
        RegistryClient::new(self.joined(channel))
    }

    /// Heartbeats, to the SMS followed now.
    pub fn nodes(&self) -> Result<NodesClient<Joined>, LinkError> {
        Ok(NodesClient::new(self.joined(self.channel()?)))
    }

    /// Approvals of single calls, from the SMS followed now.
    pub fn approvals(&self) -> Result<ApprovalsClient<Joined>, LinkError> {
        Ok(ApprovalsClient::new(self.joined(self.channel()?)))
    }

    /// Slices of fleet quotas, from the SMS followed now.
    pub fn quotas(&self) -> Result<QuotasClient<Joined>, LinkError> {
        Ok(QuotasClient::new(self.joined(self.channel()?)))
    }

    /// Audit calls over `channel` (a start, before any SMS is followed).
    pub fn audit_over(&self, channel: Channel) -> AuditClient<Joined> {
        AuditClient::new(self.joined(channel))
    }

    /// The audit shipper's, to the SMS followed now.
    pub fn audit(&self) -> Result<AuditClient<Joined>, LinkError> {
        Ok(AuditClient::new(self.joined(self.channel()?)))
    }

    /// Tool definition reports, to the SMS followed now.
    pub fn pins(&self) -> Result<PinsClient<Joined>, LinkError> {
        Ok(PinsClient::new(self.joined(self.channel()?)))
    }

    /// OAuth tokens and sealed values, from the SMS followed now.
    pub fn credentials(&self) -> Result<CredentialsClient<Joined>, LinkError> {
        Ok(CredentialsClient::new(self.joined(self.channel()?)))
    }

    /// The revocation list, from the SMS followed now (TLS only: on
    /// plaintext nobody has a certificate to revoke).
    pub fn revocations(&self) -> Result<RevocationsClient<Channel>, LinkError> {
        Ok(RevocationsClient::new(self.channel()?))
    }

    /// Tasks, from `addr`: the shared channel when it is the one followed,
    /// else a connection made now.
    pub async fn tasks(&self, addr: &str) -> Result<TasksClient<Joined>, LinkError> {
        let shared = match self.inner.current.lock().as_ref() {
            Some((at, channel)) if at == addr => Some(channel.clone()),
            _ => None,
        };
        let channel = match shared {
            Some(channel) => channel,
            None => self.connect(addr).await?,
        };
        Ok(TasksClient::new(self.joined(channel)))
    }
}

/// Whether `error`, or anything that caused it, is a refused connection:
/// nothing listens at the address.
pub fn nobody_listening(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        cause = match e.downcast_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => return true,
            // An io::Error wrapping another hides it from `source`.
            Some(io) => io.get_ref().map(|inner| inner as _).or_else(|| e.source()),
            None => e.source(),
        };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_followed_sms_comes_first_and_its_channel_is_shared() {
        let link = SmsLink::new(
            vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            None,
            JoinToken::default(),
        );
        assert!(matches!(link.nodes(), Err(LinkError::NotConnected)));
        assert_eq!(link.candidates(), ["127.0.0.1:1", "127.0.0.1:2"]);
        let (endpoint, dialer) = dial("127.0.0.1:2", None, Identity::Sms).unwrap();
        link.follow("127.0.0.1:2", dialer.connect_lazy(endpoint));
        assert_eq!(link.candidates(), ["127.0.0.1:2", "127.0.0.1:1"]);
        assert!(link.nodes().is_ok() && link.credentials().is_ok());
    }
}
