//! What every backend is to the loop: [`LlmBackend`], a request in and a
//! reply or an [`LlmError`] out. Above both the chat shape (`types.rs`)
//! and the request (`request.rs`), which it takes.

use async_trait::async_trait;
use spear_guest::request::RequestParams;

use super::request::{ChatRequest, Unsupported};
use super::types::{LlmError, Reply};

/// A chat completion backend.
#[async_trait]
pub trait LlmBackend: Send + Sync {
    async fn complete(&self, request: ChatRequest<'_>) -> Result<Reply, LlmError>;

    /// Refuses the params this backend's provider cannot honour, before
    /// anything is sent (a session checks at `set_param` and at send).
    fn check(&self, _params: &RequestParams) -> Result<(), Unsupported> {
        Ok(())
    }

    /// True when this backend searches the session's tools on the
    /// provider's side (`tool_search = "native"`): the loop then sends
    /// them deferred instead of offering the node's search tool.
    fn searches_natively(&self) -> bool {
        false
    }

    /// The model it asks, for the guest's reply.
    fn model(&self) -> &str {
        ""
    }

    /// The provider's wire format (`gen_ai.provider.name` in traces).
    fn provider(&self) -> &'static str {
        ""
    }
}
