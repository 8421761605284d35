//! Where an OAuth flow's requests may go. Every HTTP request of a flow —
//! discovery (RFC 9728 protected-resource metadata, RFC 8414 metadata),
//! registration, token requests — goes out through the client's
//! [`Network`]. A server's metadata names those URLs, so a hostile server
//! could point them at SMS's own host or network (etcd on loopback, a
//! cloud metadata endpoint); a guarded network checks each URL, each
//! redirect hop and each name's addresses against the egress allow-list
//! ([`spear_egress`]) before it connects.
//!
//! Redirects are followed only where the flow allows them (discovery), at
//! most [`MAX_REDIRECTS`], each hop checked; answers are read up to
//! [`MAX_BODY`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientFuture, OAuthHttpRedirectPolicy, OAuthHttpRequest,
};
use rmcp::transport::AuthorizationManager;
use spear_egress::{Egress, EgressPolicy, EgressRefused};

use crate::OAuthError;

/// The most redirects a discovery request follows.
pub const MAX_REDIRECTS: usize = 5;
/// The largest answer read from an authorization server or a metadata URL.
pub const MAX_BODY: usize = 1024 * 1024;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request of the flow was not made or not read.
type HttpError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP clients of OAuth flows, and the guard they obey (none for an
/// operator's own command line, which reaches what its operator points
/// it at).
#[derive(Clone)]
pub struct Network {
    egress: Option<Egress>,
    /// The flow's last refused URL: rmcp reports a failed discovery in
    /// words of its own ("metadata discovery failed"), so the refusal is
    /// kept to say why ([`Network::explain`]).
    refused: Arc<Mutex<Option<EgressRefused>>>,
    follow: reqwest::Client,
    stop: reqwest::Client,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("guarded", &self.egress.is_some())
            .finish()
    }
}

impl Default for Network {
    /// Public addresses only: the safe choice when nobody said otherwise.
    fn default() -> Network {
        Network::guarded(Egress::fixed(EgressPolicy::default()))
    }
}

impl Network {
    /// Requests that reach only what `egress` allows.
    pub fn guarded(egress: Egress) -> Network {
        Network::build(Some(egress))
    }

    /// Requests that reach any address: for a login an operator runs on
    /// their own terminal (rmcp still checks the hosts metadata names).
    pub fn unguarded() -> Network {
        Network::build(None)
    }

    fn build(egress: Option<Egress>) -> Network {
        let client = |redirects: reqwest::redirect::Policy| {
            let mut builder = reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(redirects);
            if let Some(egress) = &egress {
                builder = builder.dns_resolver(egress.resolver());
            }
            builder.build().unwrap_or_default()
        };
        let hops = egress.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            let refused = hops.as_ref().and_then(|e| e.check_url(attempt.url()).err());
            if let Some(refused) = refused {
                // Said in the log; a redirect's refusal reaches the flow's
                // error through reqwest's own.
                tracing::warn!("OAuth: {refused}");
                attempt.error(refused)
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        Network {
            refused: Arc::default(),
            follow: client(follow),
            stop: client(reqwest::redirect::Policy::none()),
            egress,
        }
    }

    /// The same network for one flow of its own, whose refusals
    /// [`Network::explain`] tells apart from other flows'.
    pub fn for_flow(&self) -> Network {
        Network {
            refused: Arc::default(),
            ..self.clone()
        }
    }

    /// `error`, with the reason when this flow's network refused a URL
    /// (rmcp's own words for it name only what failed).
    pub fn explain(&self, error: OAuthError) -> OAuthError {
        match self.refused.lock().take() {
            Some(refused) => OAuthError::Flow(format!("{refused} (OAuth: {error})")),
            None => error,
        }
    }

    /// The authorization manager of the server at `server_url`, whose
    /// requests all go through this network.
    pub(crate) async fn manager(
        &self,
        server_url: &str,
    ) -> Result<AuthorizationManager, OAuthError> {
        Ok(
            AuthorizationManager::new_with_oauth_http_client(server_url, Arc::new(self.clone()))
                .await?,
        )
    }

    /// Sends `request`, following redirects if `follow`; a URL the guard
    /// refuses is not sent (a name is checked as it resolves).
    pub(crate) async fn send(
        &self,
        request: reqwest::Request,
        follow: bool,
    ) -> Result<reqwest::Response, HttpError> {
        if let Some(refused) = self
            .egress
            .as_ref()
            .and_then(|e| e.check_url(request.url()).err())
        {
            tracing::warn!("OAuth: {refused}");
            *self.refused.lock() = Some(refused.clone());
            return Err(Box::new(refused));
        }
        let client = if follow { &self.follow } else { &self.stop };
        Ok(client.execute(request).await?)
    }

    /// A request builder on the no-redirect client, for a token request
    /// (it carries a credential); send it with [`Network::send`].
    pub(crate) fn token_request(&self, url: &str) -> reqwest::RequestBuilder {
        self.stop.post(url)
    }
}

/// `response`'s body, or an error past [`MAX_BODY`].
pub(crate) async fn read_bounded(response: reqwest::Response) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("the answer is over {} KiB", MAX_BODY / 1024).into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

impl OAuthHttpClient for Network {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let follow = !matches!(request.redirect_policy, OAuthHttpRedirectPolicy::Stop);
            let outgoing = reqwest::Request::try_from(request.request)?;
            let response = self.send(outgoing, follow).await?;
            let mut answer = http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            Ok(answer.body(read_bounded(response).await?)?)
        })
    }
}
