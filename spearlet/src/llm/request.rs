//! What one model request carries besides the conversation: the session's
//! request params ([`RequestParams`], the guest's typed values), which each
//! backend maps to its provider's wire format, and the sentence for a
//! param a backend cannot honour ([`Unsupported`]): a param is never
//! silently dropped.

use serde_json::{json, Value};
use spear_guest::request::{RequestParams, ToolChoice};

use super::types::{ChatMessage, ToolSpec};

/// One model request.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    pub messages: &'a [ChatMessage],
    pub tools: &'a [ToolSpec],
    /// `tool_choice`, when it names a tool, names it as offered in `tools`.
    pub params: &'a RequestParams,
}

impl<'a> ChatRequest<'a> {
    /// A request with no params set (the provider's defaults).
    pub fn plain(messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> Self {
        ChatRequest {
            messages,
            tools,
            params: &RequestParams::UNSET,
        }
    }

    /// The tool choice to send: none when no tools are offered (providers
    /// refuse one without tools; the loop refuses `required` or a named
    /// tool without tools before it sends).
    pub fn tool_choice(&self) -> Option<&'a ToolChoice> {
        if self.tools.is_empty() {
            return None;
        }
        self.params.tool_choice.as_ref()
    }

    /// True when some tools are deferred for the provider's own search.
    pub fn defers_tools(&self) -> bool {
        self.tools.iter().any(|t| t.deferred)
    }

    /// Writes the sampling params every provider spells alike
    /// (`temperature`, `top_p`) into a request body; each backend maps
    /// the rest itself.
    pub fn write_sampling(&self, body: &mut Value) {
        if let Some(t) = self.params.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(t) = self.params.top_p {
            body["top_p"] = json!(t);
        }
    }
}

/// A param this backend's provider has no equivalent for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param} cannot be honoured by {provider} backends: {why}")]
pub struct Unsupported {
    pub param: &'static str,
    /// The wire format, e.g. "Anthropic messages".
    pub provider: &'static str,
    pub why: &'static str,
}
