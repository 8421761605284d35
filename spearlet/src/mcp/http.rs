//! Remote MCP servers over HTTP: the Streamable HTTP transport, built on the
//! node's pooled HTTP client (the egress-guarded one on a node, the plain
//! [`http_client`] for `spearlet mcp`; rmcp handles `MCP-Session-Id`,
//! `MCP-Protocol-Version` and re-initialising after a 404), with bearer
//! tokens from a [`TokenSource`] for servers behind OAuth.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use spear_proto::v1::ServerSpec;

use super::bearer::{BearerClient, TokenSource};
use super::error::McpError;
use crate::env_refs::Resolver;
use crate::http_client::http_client;

/// A remote server's URL and headers with references resolved, and where
/// its tokens come from if it is behind OAuth.
#[derive(Clone)]
pub struct HttpTarget {
    pub url: String,
    /// The client that reaches it.
    pub client: reqwest::Client,
    /// Marked sensitive, so they never show in debug output.
    pub headers: HashMap<HeaderName, HeaderValue>,
    pub tokens: Option<Arc<dyn TokenSource>>,
}

/// Resolves `url` and `headers` on this node. Errors name the header, never its value.
pub fn resolve_target(
    spec: &ServerSpec,
    lookup: &crate::env_refs::LookupFn<'_>,
) -> Result<HttpTarget, McpError> {
    let mut resolver = Resolver::default();
    let url = resolver.resolve("url", &spec.url, lookup)?;
    let mut headers = HashMap::new();
    for (name, value) in &spec.headers {
        let value = resolver.resolve(&format!("headers.{name}"), value, lookup)?;
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| McpError::InvalidHeader(format!("header name '{name}' is not valid")))?;
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            McpError::InvalidHeader(format!(
                "the value of header '{name}' is not a valid header value"
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    Ok(HttpTarget {
        url,
        client: http_client(),
        headers,
        tokens: None,
    })
}

/// The Streamable HTTP transport to `target`.
pub fn streamable_transport(
    target: HttpTarget,
) -> Result<StreamableHttpClientTransport<BearerClient>, McpError> {
    let config =
        StreamableHttpClientTransportConfig::with_uri(target.url).custom_headers(target.headers);
    Ok(StreamableHttpClientTransport::with_client(
        BearerClient::new(target.client, target.tokens),
        config,
    ))
}
