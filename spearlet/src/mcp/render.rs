//! A tool result as a model reads it: text content as is, `structuredContent`
//! as JSON, other content described in one line, `isError` kept, and the
//! whole bounded by the server's `max_output_bytes`, cut on a UTF-8 boundary
//! with an explicit marker.

use rmcp::model::CallToolResult;
use serde_json::Value;
use spear_common::text;

/// What the model gets back from one call.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedResult {
    pub text: String,
    pub is_error: bool,
    pub truncated: bool,
    /// The server's own result, for an MCP client of the northbound
    /// endpoint (`spearlet/src/northbound/`), when it fits the same bound.
    pub upstream: Option<std::sync::Arc<CallToolResult>>,
}

/// Renders a result within `max_bytes` (the marker included).
pub fn render_result(result: &CallToolResult, max_bytes: usize) -> RenderedResult {
    // Render from the wire form, so every content type is handled as sent.
    let wire = serde_json::to_value(result).unwrap_or(Value::Null);
    let mut parts: Vec<String> = Vec::new();
    if let Some(content) = wire.get("content").and_then(Value::as_array) {
        parts.extend(content.iter().map(describe));
    }
    if let Some(structured) = wire.get("structuredContent") {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    let is_error = result.is_error.unwrap_or(false);
    if text.len() <= max_bytes {
        return RenderedResult {
            text,
            is_error,
            truncated: false,
            upstream: None,
        };
    }
    let marker = format!("\n[output truncated: {} of {} bytes shown]", 0, text.len());
    let keep = max_bytes.saturating_sub(marker.len() + 8);
    let kept = text::prefix(&text, keep);
    let marker = format!(
        "\n[output truncated: {} of {} bytes shown]",
        kept.len(),
        text.len()
    );
    RenderedResult {
        text: format!("{kept}{marker}"),
        is_error,
        truncated: true,
        upstream: None,
    }
}

fn describe(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        "image" => format!(
            "[image: {}, {} bytes base64]",
            field("mimeType"),
            field("data").len()
        ),
        "audio" => format!(
            "[audio: {}, {} bytes base64]",
            field("mimeType"),
            field("data").len()
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[binary resource {uri}]"),
            }
        }
        "resource_link" => format!("[resource link: {} {}]", field("name"), field("uri")),
        other => format!("[{other} content]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn content_types_render_for_a_model() {
        let r = result(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "mimeType": "image/png", "data": "aGk="},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}}
            ],
            "structuredContent": {"n": 1},
            "isError": true
        }));
        let out = render_result(&r, 10_000);
        assert!(out.is_error && !out.truncated);
        assert_eq!(
            out.text,
            "hello\n[image: image/png, 4 bytes base64]\n[resource file:///a]\ninside\n{\"n\":1}"
        );
    }

    #[test]
    fn long_output_is_cut_on_a_char_boundary_with_a_marker() {
        let text = "é".repeat(1000);
        let r = result(serde_json::json!({"content": [{"type": "text", "text": text}]}));
        let out = render_result(&r, 500);
        assert!(out.truncated);
        assert!(out.text.len() <= 500, "{}", out.text.len());
        assert!(
            out.text.contains("[output truncated: ") && out.text.contains("of 2000 bytes shown]")
        );
        assert_eq!(text::prefix("éé", 3), "é");
    }
}
