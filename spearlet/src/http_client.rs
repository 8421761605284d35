//! The node's one outbound HTTP client, shared by the MCP HTTP transports
//! and the LLM providers: one connection pool, one connect timeout. Request
//! timeouts are set per request by each user.

use std::sync::OnceLock;
use std::time::Duration;

/// The node's HTTP client: pooled, with a connect timeout; request timeouts
/// are applied per MCP request.
pub fn http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .pool_idle_timeout(Duration::from_secs(90))
                .tcp_nodelay(true)
                .build()
                .unwrap_or_default()
        })
        .clone()
}
