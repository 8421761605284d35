//! LLM backends, behind one provider-neutral chat shape: OpenAI-compatible
//! chat completions (OpenAI, DeepSeek, vLLM, llama.cpp, Ollama, LiteLLM) and
//! Anthropic messages.

mod anthropic;
mod backend;
mod config;
mod openai;
mod prices;
mod request;
mod retry;
mod stream;
mod types;

pub use anthropic::{AnthropicBackend, AnthropicConfig};
pub use backend::LlmBackend;
pub use config::{BackendError, BackendKind, BackendSection, Backends, LlmSection};
pub use openai::{OpenAiBackend, OpenAiConfig};
pub use prices::{usd, BadPrice, PriceSection, Prices};
pub use request::{ChatRequest, Unsupported};
pub use types::{
    ChatMessage, LlmError, ProviderSearch, Reply, Role, StopReason, ToolCall, ToolSpec, Usage,
};
