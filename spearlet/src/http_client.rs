//! The node's one outbound HTTP client, shared by the MCP HTTP transports
//! and the LLM providers: one connection pool, one connect timeout, and
//! redirects followed only within the origin the request was sent to.
//! Request timeouts are set per request by each user.
//!
//! Why no cross-origin redirect: requests carry secret headers (API keys,
//! `Authorization`, whatever a server file declares). reqwest drops the
//! standard credential headers on a cross-host redirect but keeps custom
//! ones, so a server (or anyone who controls its redirects) could send a
//! key to a host of its choosing. A redirect elsewhere fails the request
//! with [`CrossOriginRedirect`] instead.

use std::sync::OnceLock;
use std::time::Duration;

use crate::node_policy::Egress;

/// The node's HTTP client: pooled, with a connect timeout; request timeouts
/// are applied per MCP request. Not guarded: for the operator's own LLM
/// backends, and for `spearlet mcp`, which an operator points where they
/// like.
pub fn http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| builder().build().unwrap_or_default())
        .clone()
}

/// A client like [`http_client`] whose connections obey `egress`: for the
/// MCP HTTP servers server files name. One per node, so it has one pool.
pub fn guarded_http_client(egress: &Egress) -> reqwest::Client {
    builder()
        .dns_resolver(egress.resolver())
        .build()
        .unwrap_or_default()
}

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .http1_max_headers(MAX_RESPONSE_HEADERS)
        .redirect(same_origin_redirects())
}

/// The most headers a response may have. Their size is bounded by hyper:
/// a response head over about 400 KiB fails the request ("message head is
/// too large"). The client speaks HTTP/1.1 only (reqwest's `http2` is not
/// built), and decompresses nothing (nor gzip, brotli or zstd), so a
/// compressed body arrives as the bytes it is.
pub const MAX_RESPONSE_HEADERS: usize = 100;

/// The most redirects a request follows.
const MAX_REDIRECTS: usize = 5;

/// A server redirected a request to another origin, which the node refuses.
#[derive(Debug, thiserror::Error)]
#[error("the server redirected to another origin ({to}); the node follows redirects only within the origin it was given, so secret headers never leave it")]
pub struct CrossOriginRedirect {
    /// Scheme, host and port only: a path or query may carry secrets.
    pub to: String,
}

fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(reqwest::Url::origin);
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if first.as_ref() != Some(&attempt.url().origin()) {
            let refused = CrossOriginRedirect {
                to: attempt.url().origin().ascii_serialization(),
            };
            // Said here too: rmcp flattens a transport error to reqwest's
            // own text, which stops at "error following redirect".
            tracing::warn!("{refused}");
            attempt.error(refused)
        } else {
            attempt.follow()
        }
    })
}

/// The sentence for a failed HTTP request: reqwest's own, without the URL
/// (a URL may carry secrets in its path or query), followed by each of its
/// causes, as in "error following redirect: the server redirected to
/// another origin (…)" or "error sending request: … Connection refused".
/// reqwest's Display alone stops at its own kind, which no one can act on.
pub fn describe(error: reqwest::Error) -> String {
    describe_ref(&error.without_url())
}

/// [`describe`] of a borrowed error: its text with the URL left out.
pub fn describe_ref(error: &reqwest::Error) -> String {
    let own = error.to_string();
    let mut sentence = match error.url() {
        Some(url) => own.replace(&format!(" for url ({url})"), ""),
        None => own,
    };
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        sentence.push_str(": ");
        sentence.push_str(&error.to_string());
        cause = error.source();
    }
    sentence
}
