//! Bearer tokens on a Streamable HTTP connection. Entry point:
//! [`BearerClient`], the transport's HTTP client, which asks a
//! [`TokenSource`] for the token of each request and lets the server's
//! refusals drive it:
//!
//! - no token yet: the request goes out without one, and the server's 401
//!   challenge goes to [`TokenSource::challenged`] (a login, or a token
//!   fetched from SMS);
//! - a token the server refuses (401: expired, revoked): the source is told
//!   which token failed and gives a fresh one, if it can;
//! - 403 `insufficient_scope`: the source may step up;
//!
//! each at most once per request: a second refusal is the answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use spear_proto::v1::SealedValue;
use sse_stream::{Error as SseError, Sse};

use super::standalone::StandaloneFirst;
use super::stream_budget::{bounded, Budget, FloodMark};
use spear_oauth::dpop::DpopKey;

/// Why a source has no token to give: one sentence for the operator.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct TokenError(pub String);

/// What the server said when it refused a request.
#[derive(Debug, Clone)]
pub enum Challenge {
    /// 401, with its `WWW-Authenticate`.
    Unauthorized(String),
    /// 403 `insufficient_scope`, with its `WWW-Authenticate`.
    InsufficientScope(String),
}

/// Where one server's bearer tokens come from.
#[async_trait::async_trait]
pub trait TokenSource: Send + Sync {
    /// The token for the next request; `None` sends it without one.
    async fn token(&self) -> Result<Option<String>, TokenError>;

    /// The server refused a request sent with `sent`: a token to send it
    /// again with, or `None` to let the refusal stand.
    async fn challenged(
        &self,
        sent: Option<&str>,
        challenge: &Challenge,
    ) -> Result<Option<String>, TokenError>;

    /// The key the current token is bound to (DPoP, RFC 9449), if it is:
    /// its requests then prove possession of it.
    async fn dpop_key(&self) -> Option<Arc<DpopKey>> {
        None
    }
}

/// Where each OAuth server's tokens come from on this node (SMS for a
/// cluster; a login on the terminal for `spearlet mcp`), and who opens the
/// values SMS sealed in a server's spec (SMS, for its nodes only).
#[async_trait::async_trait]
pub trait Credentials: Send + Sync {
    fn tokens(&self, server_id: &str) -> Arc<dyn TokenSource>;

    /// The tokens of one person at `server_id` (a server that acts per
    /// principal), for the runs whose delegation `delegation` holds.
    fn tokens_for(&self, server_id: &str, delegation: super::Delegation) -> Arc<dyn TokenSource> {
        let _ = (server_id, delegation);
        Arc::new(NoPerson)
    }

    /// `sealed`, the sealed values of `server_id`, opened, in order.
    async fn open_sealed(
        &self,
        server_id: &str,
        sealed: &[SealedValue],
    ) -> Result<Vec<String>, TokenError> {
        let _ = (server_id, sealed);
        Err(TokenError(
            "SMS sealed its file's literal env or headers values and opens them only for its nodes; run it on a node, or write those values as ${NAME} references".into(),
        ))
    }
}

/// The node's pooled HTTP client, with tokens from `tokens` when the
/// server is behind OAuth.
#[derive(Clone)]
pub struct BearerClient {
    http: reqwest::Client,
    tokens: Option<Arc<dyn TokenSource>>,
    /// Keeps a session's standalone stream ahead of its requests.
    standalone: StandaloneFirst,
    /// The nonce the server wants in DPoP proofs, once it said so.
    dpop_nonce: Arc<parking_lot::Mutex<Option<String>>>,
    /// The connection's last stream flood, which keeps its `GET` streams shut.
    floods: FloodMark,
}

/// How one attempt presents its token: as rmcp's bearer, or (DPoP) in
/// headers of its own.
struct Presented {
    bearer: Option<String>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Presented {
    fn none() -> Presented {
        Presented {
            bearer: None,
            headers: Vec::new(),
        }
    }

    /// `headers` with this attempt's own.
    fn with(&self, headers: &HashMap<HeaderName, HeaderValue>) -> HashMap<HeaderName, HeaderValue> {
        let mut all = headers.clone();
        all.extend(self.headers.iter().cloned());
        all
    }
}

type HttpError = StreamableHttpError<reqwest::Error>;

impl BearerClient {
    pub fn new(http: reqwest::Client, tokens: Option<Arc<dyn TokenSource>>) -> BearerClient {
        BearerClient {
            http,
            tokens,
            standalone: StandaloneFirst::default(),
            dpop_nonce: Arc::default(),
            floods: FloodMark::default(),
        }
    }

    /// How `token` goes on a `method` request to `uri`: a bearer, or,
    /// bound to `key`, `Authorization: DPoP` with a fresh proof.
    fn present(
        &self,
        token: Option<String>,
        key: Option<&DpopKey>,
        method: &str,
        uri: &str,
    ) -> Result<Presented, HttpError> {
        let (Some(token), Some(key)) = (&token, key) else {
            return Ok(Presented {
                bearer: token,
                headers: Vec::new(),
            });
        };
        let nonce = self.dpop_nonce.lock().clone();
        let proof = key
            .proof(method, uri, Some(token), nonce.as_deref())
            .map_err(|e| auth_error(TokenError(e.to_string())))?;
        let header = |text: String| {
            let mut value = HeaderValue::from_str(&text).map_err(|_| {
                auth_error(TokenError("the token is not a valid header value".into()))
            })?;
            value.set_sensitive(true);
            Ok::<_, HttpError>(value)
        };
        Ok(Presented {
            bearer: None,
            headers: vec![
                (
                    http::header::AUTHORIZATION,
                    header(format!("DPoP {token}"))?,
                ),
                (
                    HeaderName::from_static(spear_oauth::dpop::DPOP_HEADER),
                    header(proof)?,
                ),
            ],
        })
    }

    /// Learns the nonce a DPoP server asked for (`use_dpop_nonce`): its 401
    /// carries it in `DPoP-Nonce`, which rmcp's transport does not pass
    /// on, so a `ping` proves the same token once more and the refusal's
    /// header is read. Whether a nonce was learned.
    async fn learn_nonce(&self, uri: &str, token: &str, key: &DpopKey) -> bool {
        let Ok(presented) = self.present(Some(token.to_string()), Some(key), "POST", uri) else {
            return false;
        };
        let mut probe = self
            .http
            .post(uri)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":"spear-dpop-nonce","method":"ping"}"#);
        for (name, value) in presented.headers {
            probe = probe.header(name, value);
        }
        let Ok(answer) = probe.send().await else {
            return false;
        };
        let nonce = answer
            .headers()
            .get(spear_oauth::dpop::NONCE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let learned = nonce.is_some();
        if learned {
            *self.dpop_nonce.lock() = nonce;
        }
        learned
    }

    /// One attempt of `call` with `token`, and, when it is DPoP-bound and
    /// the server asks for a nonce, once more with it.
    async fn attempt<T, F, Fut>(
        &self,
        tokens: &Arc<dyn TokenSource>,
        token: Option<String>,
        method: &str,
        uri: &str,
        call: &F,
    ) -> Result<T, HttpError>
    where
        F: Fn(Presented) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let key = tokens.dpop_key().await;
        let answer = call(self.present(token.clone(), key.as_deref(), method, uri)?).await;
        if let (Err(StreamableHttpError::AuthRequired(e)), Some(key), Some(sent)) =
            (&answer, &key, &token)
        {
            if e.www_authenticate_header.contains("use_dpop_nonce")
                && self.learn_nonce(uri, sent, key).await
            {
                return call(self.present(token.clone(), Some(key), method, uri)?).await;
            }
        }
        answer
    }

    /// Runs `call` with the source's token, and once more with a fresh one
    /// if the server refuses it and the source has another (or, for a DPoP
    /// token, with the nonce the server asked for).
    async fn with_token<T, F, Fut>(&self, method: &str, uri: &str, call: F) -> Result<T, HttpError>
    where
        F: Fn(Presented) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let Some(tokens) = &self.tokens else {
            return call(Presented::none()).await;
        };
        let sent = tokens.token().await.map_err(auth_error)?;
        let first = self.attempt(tokens, sent.clone(), method, uri, &call).await;
        let challenge = match &first {
            Err(StreamableHttpError::AuthRequired(e)) => {
                Challenge::Unauthorized(e.www_authenticate_header.clone())
            }
            Err(StreamableHttpError::InsufficientScope(e)) => {
                Challenge::InsufficientScope(e.www_authenticate_header.clone())
            }
            _ => return first,
        };
        match tokens
            .challenged(sent.as_deref(), &challenge)
            .await
            .map_err(auth_error)?
        {
            Some(fresh) => self.attempt(tokens, Some(fresh), method, uri, &call).await,
            None => first,
        }
    }
}

/// A source's sentence, carried through rmcp's error type; [`auth_failure`]
/// takes it out again.
fn auth_error(error: TokenError) -> HttpError {
    StreamableHttpError::Auth(AuthError::AuthorizationFailed(error.0))
}

/// The request's `_meta.traceparent` (set for a traced tool call) as the
/// `traceparent` header too, for HTTP servers and proxies that trace.
fn add_traceparent(headers: &mut HashMap<HeaderName, HeaderValue>, message: &ClientJsonRpcMessage) {
    use rmcp::model::{GetMeta, JsonRpcMessage};
    let JsonRpcMessage::Request(request) = message else {
        return;
    };
    if let Some(value) = request
        .request
        .get_meta()
        .0
        .get("traceparent")
        .and_then(|t| t.as_str())
        .and_then(|t| HeaderValue::from_str(t).ok())
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
}

impl StreamableHttpClient for BearerClient {
    type Error = reqwest::Error;

    /// rmcp calls the variants with limits; this one, required by the
    /// trait, takes the default limits.
    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth,
            headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        mut headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        add_traceparent(&mut headers, &message);
        self.standalone
            .before_post(&message, session_id.as_deref())
            .await;
        let answer = self
            .with_token("POST", &uri, |presented| {
                self.http.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    presented.bearer.clone(),
                    presented.with(&headers),
                    limits,
                )
            })
            .await?;
        Ok(match answer {
            StreamableHttpPostResponse::Sse(events, id) => {
                let events = bounded(events, Budget::per_response(), self.floods.clone());
                StreamableHttpPostResponse::Sse(events, id)
            }
            other => other,
        })
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.with_token("DELETE", &uri, |presented| {
            self.http.delete_session(
                uri.clone(),
                session_id.clone(),
                presented.bearer.clone(),
                presented.with(&headers),
            )
        })
        .await
    }

    /// rmcp calls the variant with the event size bound; this one,
    /// required by the trait, takes the default bound.
    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth,
            headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        if let Some(flood) = self.floods.holding() {
            return Err(StreamableHttpError::UnexpectedServerResponse(
                flood.to_string().into(),
            ));
        }
        let stream = self
            .with_token("GET", &uri, |presented| {
                self.http.get_stream_with_max_sse_event_size(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    presented.bearer.clone(),
                    presented.with(&headers),
                    max_sse_event_size,
                )
            })
            .await;
        self.standalone
            .answered(session_id.as_deref(), last_event_id.as_deref());
        let floods = self.floods.clone();
        stream.map(|events| bounded(events, Budget::per_minute(), floods))
    }
}

/// The token source of a process that cannot act for people (no SMS).
struct NoPerson;

const NO_PERSON: &str = "this server acts for the person who invoked the run, and only SMS (on a cluster node) gets a person's token";

#[async_trait::async_trait]
impl TokenSource for NoPerson {
    async fn token(&self) -> Result<Option<String>, TokenError> {
        Err(TokenError(NO_PERSON.into()))
    }

    async fn challenged(
        &self,
        _sent: Option<&str>,
        _challenge: &Challenge,
    ) -> Result<Option<String>, TokenError> {
        Err(TokenError(NO_PERSON.into()))
    }
}
