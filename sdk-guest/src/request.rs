//! The request params of a session (`model`, `temperature`,
//! `response_format`, ...) as typed values, shared by this SDK (which
//! builds them) and the node (which parses, validates and maps them to each
//! provider's wire format), so a key means the same on both sides.
//!
//! Each param is written on its own with `cchat_ctl_set_param(key, json)`;
//! [`Param`] names them and [`RequestParams`] holds a session's values.
//! `null` clears a param back to the provider's or task's default.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which tools the model may or must call in a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(ToolMode),
    /// `{"name": "..."}`: this one tool, named as the model sees it (a
    /// guest tool's own name, an `mcp__…` name, or `mcp.<server>.<tool>`).
    Named { name: String },
}

/// [`ToolChoice`]'s plain modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// The model decides (the default).
    Auto,
    /// The model calls no tool.
    None,
    /// The model calls at least one tool.
    Required,
}

/// The shape of the model's answer, in OpenAI's own wire shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text (the default).
    Text,
    /// Any JSON object (OpenAI-compatible backends only).
    JsonObject,
    /// JSON matching a schema; the reply's `json` holds it parsed.
    JsonSchema { json_schema: JsonSchemaFormat },
}

/// A named JSON schema for [`ResponseFormat::JsonSchema`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonSchemaFormat {
    /// `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// A JSON schema whose root is `{"type": "object", ...}`.
    pub schema: Value,
    /// Ask the provider to enforce the schema exactly.
    #[serde(default)]
    pub strict: bool,
}

/// A session's request params; `None` leaves the provider's (or, for the
/// loop limits, the task's) value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestParams {
    /// A backend name from the node's config, among those the task allows.
    pub backend: Option<String>,
    /// A model of that backend, among those the task and the node allow.
    pub model: Option<String>,
    /// 0 to 2 (Anthropic: 0 to 1).
    pub temperature: Option<f64>,
    /// Above 0, at most 1.
    pub top_p: Option<f64>,
    /// Output tokens per model answer.
    pub max_tokens: Option<u32>,
    /// Up to 4 sequences that end the answer.
    pub stop: Option<Vec<String>>,
    /// Sampling seed (OpenAI-compatible backends only).
    pub seed: Option<i64>,
    /// Applies to the first request of a send; later requests of the
    /// automatic loop use `auto`, or the model could never answer.
    pub tool_choice: Option<ToolChoice>,
    /// `false`: at most one tool call per answer.
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<ResponseFormat>,
    /// Model requests per send; at most the task's `limits.max_iterations`.
    pub max_iterations: Option<u32>,
    /// Tool calls per send; at most the task's `limits.max_total_tool_calls`.
    pub max_total_tool_calls: Option<u32>,
    /// Each send's deadline; at most the task's `limits.wall_ms`.
    pub timeout_ms: Option<u64>,
}

impl RequestParams {
    /// No param set: every value the provider's or the task's.
    pub const UNSET: RequestParams = RequestParams {
        backend: None,
        model: None,
        temperature: None,
        top_p: None,
        max_tokens: None,
        stop: None,
        seed: None,
        tool_choice: None,
        parallel_tool_calls: None,
        response_format: None,
        max_iterations: None,
        max_total_tool_calls: None,
        timeout_ms: None,
    };
}

impl Default for RequestParams {
    fn default() -> Self {
        Self::UNSET
    }
}

/// The request param keys of `cchat_ctl_set_param`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Backend,
    Model,
    Temperature,
    TopP,
    MaxTokens,
    Stop,
    Seed,
    ToolChoice,
    ParallelToolCalls,
    ResponseFormat,
    MaxIterations,
    MaxTotalToolCalls,
    TimeoutMs,
}

impl Param {
    pub const ALL: [Param; 13] = [
        Param::Backend,
        Param::Model,
        Param::Temperature,
        Param::TopP,
        Param::MaxTokens,
        Param::Stop,
        Param::Seed,
        Param::ToolChoice,
        Param::ParallelToolCalls,
        Param::ResponseFormat,
        Param::MaxIterations,
        Param::MaxTotalToolCalls,
        Param::TimeoutMs,
    ];

    /// The key a guest writes.
    pub fn key(self) -> &'static str {
        match self {
            Param::Backend => "backend",
            Param::Model => "model",
            Param::Temperature => "temperature",
            Param::TopP => "top_p",
            Param::MaxTokens => "max_tokens",
            Param::Stop => "stop",
            Param::Seed => "seed",
            Param::ToolChoice => "tool_choice",
            Param::ParallelToolCalls => "parallel_tool_calls",
            Param::ResponseFormat => "response_format",
            Param::MaxIterations => "max_iterations",
            Param::MaxTotalToolCalls => "max_total_tool_calls",
            Param::TimeoutMs => "timeout_ms",
        }
    }

    /// The param a key names, if it is one.
    pub fn from_key(key: &str) -> Option<Param> {
        Param::ALL.into_iter().find(|p| p.key() == key)
    }
}

/// Builders, one per param: `RequestParams::new().model("m").temperature(0.2)`.
impl RequestParams {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn backend(mut self, name: &str) -> Self {
        self.backend = Some(name.to_string());
        self
    }

    pub fn model(mut self, name: &str) -> Self {
        self.model = Some(name.to_string());
        self
    }

    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = Some(t);
        self
    }

    pub fn top_p(mut self, p: f64) -> Self {
        self.top_p = Some(p);
        self
    }

    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    pub fn stop(mut self, sequences: &[&str]) -> Self {
        self.stop = Some(sequences.iter().map(|s| s.to_string()).collect());
        self
    }

    pub fn seed(mut self, seed: i64) -> Self {
        self.seed = Some(seed);
        self
    }

    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// `tool_choice` naming one tool.
    pub fn force_tool(self, name: &str) -> Self {
        self.tool_choice(ToolChoice::Named {
            name: name.to_string(),
        })
    }

    pub fn parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.parallel_tool_calls = Some(parallel);
        self
    }

    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// `response_format` `json_schema` with this name and schema, strict.
    pub fn json_schema(self, name: &str, schema: Value) -> Self {
        self.response_format(ResponseFormat::JsonSchema {
            json_schema: JsonSchemaFormat {
                name: name.to_string(),
                schema,
                strict: true,
            },
        })
    }

    pub fn max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = Some(n);
        self
    }

    pub fn max_total_tool_calls(mut self, n: u32) -> Self {
        self.max_total_tool_calls = Some(n);
        self
    }

    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
}

impl RequestParams {
    /// Each param that is set, as `(key, JSON value)`, in [`Param::ALL`]'s
    /// order: what the SDK writes.
    pub fn writes(&self) -> Vec<(&'static str, Value)> {
        Param::ALL
            .into_iter()
            .map(|p| (p.key(), self.get(p)))
            .filter(|(_, v)| !v.is_null())
            .collect()
    }

    /// One param's value as JSON (`null` when unset).
    pub fn get(&self, param: Param) -> Value {
        fn json<T: Serialize>(value: &T) -> Value {
            // Plain data (strings, numbers, enums of them) always serializes.
            serde_json::to_value(value).unwrap_or(Value::Null)
        }
        match param {
            Param::Backend => json(&self.backend),
            Param::Model => json(&self.model),
            Param::Temperature => json(&self.temperature),
            Param::TopP => json(&self.top_p),
            Param::MaxTokens => json(&self.max_tokens),
            Param::Stop => json(&self.stop),
            Param::Seed => json(&self.seed),
            Param::ToolChoice => json(&self.tool_choice),
            Param::ParallelToolCalls => json(&self.parallel_tool_calls),
            Param::ResponseFormat => json(&self.response_format),
            Param::MaxIterations => json(&self.max_iterations),
            Param::MaxTotalToolCalls => json(&self.max_total_tool_calls),
            Param::TimeoutMs => json(&self.timeout_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_read_as_guests_write_them() {
        let choice: ToolChoice = serde_json::from_value(json!("required")).unwrap();
        assert_eq!(choice, ToolChoice::Mode(ToolMode::Required));
        let named: ToolChoice = serde_json::from_value(json!({"name": "convert"})).unwrap();
        assert_eq!(
            named,
            ToolChoice::Named {
                name: "convert".into()
            }
        );
        let format: ResponseFormat = serde_json::from_value(json!({"type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": true}}))
        .unwrap();
        assert!(matches!(format, ResponseFormat::JsonSchema { .. }));
        let params = RequestParams {
            temperature: Some(0.5),
            tool_choice: Some(choice),
            ..Default::default()
        };
        assert_eq!(
            params.writes(),
            vec![
                ("temperature", json!(0.5)),
                ("tool_choice", json!("required"))
            ]
        );
        for param in Param::ALL {
            assert_eq!(Param::from_key(param.key()), Some(param));
        }
    }
}
