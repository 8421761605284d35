//! LLM backends, behind one provider-neutral chat shape. The OpenAI-compatible
//! chat completions API is the first backend (OpenAI, DeepSeek, vLLM,
//! llama.cpp, Ollama, LiteLLM all speak it).

mod openai;
mod types;

pub use openai::{OpenAiBackend, OpenAiConfig};
pub use types::{ChatMessage, LlmBackend, LlmError, Reply, Role, ToolCall, ToolSpec, Usage};
