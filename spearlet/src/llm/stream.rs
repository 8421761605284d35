//! Assembling streamed answers: text deltas concatenated, tool-call
//! deltas merged by index (OpenAI) or by content block (Anthropic), usage
//! and the stop reason taken from the provider's own reports. An error the
//! provider sends mid-stream (OpenAI's `{"error": …}` chunk, Anthropic's
//! `error` event) ends the answer as [`LlmError::Interrupted`]; `ping` and
//! other events are skipped. Anthropic's content blocks are also kept as
//! they came: an answer with server-side tool search is sent back with
//! them, as a whole answer's are.

use std::collections::BTreeMap;

use futures::StreamExt;
use serde_json::Value;

use super::types::{ChatMessage, LlmError, ProviderSearch, Reply, ToolCall, Usage};
use spear_common::sse::Parser;

/// Largest streamed answer accepted: the bound on every answer.
use super::retry::MAX_REPLY_BYTES as MAX_STREAM_BYTES;

#[derive(Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

/// What a stream has said so far.
pub struct Assembler {
    dialect: Dialect,
    text: String,
    calls: BTreeMap<u64, Partial>,
    usage: Usage,
    /// The provider's `finish_reason` / `stop_reason`, once sent.
    stop: Option<String>,
    /// Anthropic: every content block by index, with the JSON of its
    /// `input` as streamed so far.
    blocks: BTreeMap<u64, (Value, String)>,
}

impl Assembler {
    pub fn new(dialect: Dialect) -> Assembler {
        Assembler {
            dialect,
            text: String::new(),
            calls: BTreeMap::new(),
            usage: Usage::default(),
            stop: None,
            blocks: BTreeMap::new(),
        }
    }

    /// One event of the stream.
    pub fn event(&mut self, event: &Value) -> Result<(), LlmError> {
        if let Some(error) = event.get("error").filter(|e| e.is_object()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("an error without a message");
            return Err(LlmError::Interrupted(
                spear_common::text::prefix(message, 500).to_string(),
            ));
        }
        match self.dialect {
            Dialect::OpenAi => self.openai_chunk(event),
            Dialect::Anthropic => self.anthropic_event(event),
        }
        Ok(())
    }

    /// One OpenAI `chat.completion.chunk`.
    fn openai_chunk(&mut self, chunk: &Value) {
        if let Some(finish) = chunk
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
        {
            self.stop = Some(finish.to_string());
        }
        if let Some(delta) = chunk.pointer("/choices/0/delta") {
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(text);
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let partial = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    partial.id = id.to_string();
                }
                if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                    partial.name.push_str(name);
                }
                if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    partial.arguments.push_str(args);
                }
            }
        }
        if chunk.get("usage").is_some_and(Value::is_object) {
            self.usage = Usage::at(chunk, "/usage/prompt_tokens", "/usage/completion_tokens");
        }
    }

    /// One Anthropic stream event.
    fn anthropic_event(&mut self, event: &Value) {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.usage.prompt_tokens = event
                    .pointer("/message/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            Some("content_block_start") => {
                let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                self.blocks.insert(index, (block.clone(), String::new()));
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let partial = self.calls.entry(index).or_default();
                    partial.id = block
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    partial.name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                }
            }
            Some("content_block_delta") => {
                let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = event.get("delta").cloned().unwrap_or(Value::Null);
                let kept = self.blocks.get_mut(&index);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        self.text.push_str(text);
                        if let Some(Value::String(kept)) =
                            kept.and_then(|(block, _)| block.get_mut("text"))
                        {
                            kept.push_str(text);
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some((_, input)) = kept {
                            input.push_str(
                                delta
                                    .get("partial_json")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default(),
                            );
                        }
                        if let Some(partial) = self.calls.get_mut(&index) {
                            partial.arguments.push_str(
                                delta
                                    .get("partial_json")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default(),
                            );
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(stop) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop.to_string());
                }
                if let Some(out) = event
                    .pointer("/usage/output_tokens")
                    .and_then(Value::as_u64)
                {
                    self.usage.completion_tokens = out;
                }
            }
            _ => {}
        }
    }

    /// The complete answer.
    pub fn finish(self) -> Result<Reply, LlmError> {
        let mut tool_calls = Vec::new();
        for (_, p) in self.calls {
            if p.id.is_empty() {
                return Err(LlmError::BadReply("a streamed tool call has no id".into()));
            }
            let arguments = if p.arguments.trim().is_empty() {
                "{}".to_string()
            } else {
                p.arguments
            };
            tool_calls.push(ToolCall {
                id: p.id,
                name: p.name,
                arguments,
            });
        }
        let mut message = ChatMessage::assistant(self.text, tool_calls);
        let blocks: Vec<Value> = self
            .blocks
            .into_values()
            .map(|(mut block, input)| {
                if !input.trim().is_empty() {
                    block["input"] = serde_json::from_str(&input).unwrap_or(Value::Null);
                }
                block
            })
            .collect();
        let searches = ProviderSearch::from_anthropic(&blocks);
        if !searches.is_empty() {
            message.provider_content = Some(Value::Array(blocks).to_string());
        }
        let stop = match self.dialect {
            Dialect::OpenAi => Reply::openai_stop(self.stop.as_deref(), &message),
            Dialect::Anthropic => Reply::anthropic_stop(self.stop.as_deref(), &message),
        };
        Ok(Reply {
            message,
            usage: self.usage,
            stop,
            searches,
        })
    }
}

/// Which wire format a stream is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

/// Reads a successful streaming response to its end: `[DONE]` (OpenAI),
/// `message_stop` (Anthropic), or the end of the body once the provider
/// has said why the answer ended (servers that omit the end marker).
pub async fn read_stream(response: reqwest::Response, dialect: Dialect) -> Result<Reply, LlmError> {
    let mut parser = Parser::default();
    let mut assembler = Assembler::new(dialect);
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            LlmError::BadReply(format!(
                "the stream broke: {}",
                crate::http_client::describe(e)
            ))
        })?;
        for event in parser.feed(&chunk) {
            if event.data == "[DONE]" {
                return assembler.finish();
            }
            let value: Value = serde_json::from_str(&event.data)
                .map_err(|e| LlmError::BadReply(format!("a stream event is not JSON: {e}")))?;
            if value.get("type").and_then(Value::as_str) == Some("message_stop") {
                return assembler.finish();
            }
            assembler.event(&value)?;
        }
        if parser.pending() > MAX_STREAM_BYTES {
            return Err(LlmError::BadReply(
                "a streamed answer exceeded 32 MiB".into(),
            ));
        }
    }
    if assembler.stop.is_some() {
        return assembler.finish();
    }
    Err(LlmError::BadReply(
        "the stream ended before the model said why its answer ended (no finish_reason or stop_reason)".into(),
    ))
}
