//! Tool definition digests, the one thing nodes and SMS must compute the
//! same way to agree on a pin.
//!
//! A tool's digest is SHA-256 over the RFC 8785 (JCS) canonical JSON of
//! its definition as the server lists it, the `schemaHash` of the MCP
//! progressive-disclosure proposal: key order, whitespace and number
//! spelling do not change it; any word of a description or any schema
//! keyword does.

use sha2::{Digest, Sha256};

/// How a server's tools are pinned (its file's `"pin"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinMode {
    /// The first definitions SMS hears of become the pin; any later change
    /// waits for an operator. The default: an operator who says nothing is
    /// protected from a server that changes its tools after first use.
    FirstSeen,
    /// Nothing is offered until an operator approves the definitions.
    Approve,
    /// Tools are offered as the server lists them, whatever they say.
    Off,
}

impl PinMode {
    /// The values a server file may give.
    pub const NAMES: [&'static str; 3] = ["first-seen", "approve", "off"];

    /// The mode a spec's `pin` names; empty is the default.
    pub fn parse(name: &str) -> Option<PinMode> {
        match name {
            "" | "first-seen" => Some(PinMode::FirstSeen),
            "approve" => Some(PinMode::Approve),
            "off" => Some(PinMode::Off),
            _ => None,
        }
    }

    /// The mode of a spec, its default when unset; an unknown name (which
    /// SMS never lets into the registry) pins as strictly as it can.
    pub fn of(spec_pin: &str) -> PinMode {
        PinMode::parse(spec_pin).unwrap_or(PinMode::Approve)
    }

    pub fn name(self) -> &'static str {
        match self {
            PinMode::FirstSeen => "first-seen",
            PinMode::Approve => "approve",
            PinMode::Off => "off",
        }
    }
}

/// The fields of an MCP tool that make up its definition; anything else a
/// server sends (`_meta`, icons) is presentation, not behaviour.
pub const DEFINITION_FIELDS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// `tool` (an MCP tool as JSON) cut down to [`DEFINITION_FIELDS`].
pub fn definition(tool: &serde_json::Value) -> serde_json::Value {
    let mut kept = serde_json::Map::new();
    if let Some(fields) = tool.as_object() {
        for field in DEFINITION_FIELDS {
            if let Some(value) = fields.get(field) {
                kept.insert(field.to_string(), value.clone());
            }
        }
    }
    serde_json::Value::Object(kept)
}

/// The SHA-256 (hex) of `definition`'s canonical JSON.
pub fn digest(definition: &serde_json::Value) -> String {
    // A `Value` always serializes; an empty string would match no pin.
    let canonical = serde_json_canonicalizer::to_vec(definition).unwrap_or_default();
    hex::encode(Sha256::digest(&canonical))
}

/// The digest of a server's whole set: its sorted (name, digest) pairs, so
/// a tool added or removed changes it as much as one changed.
pub fn set_digest<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut pairs: Vec<(&str, &str)> = tools.into_iter().collect();
    pairs.sort();
    let mut hasher = Sha256::new();
    for (name, digest) in pairs {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(digest.as_bytes());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_and_spacing_do_not_change_a_digest_and_a_word_does() {
        let a = json!({"name": "echo", "description": "Echo it", "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "maximum": 1.0}}}});
        let b: serde_json::Value = serde_json::from_str(
            r#"{ "inputSchema": {"properties": {"x": {"maximum": 1, "type": "number"}}, "type": "object"},
                 "description": "Echo it", "name": "echo" }"#,
        )
        .unwrap();
        assert_eq!(digest(&a), digest(&b));
        let mut changed = a.clone();
        changed["description"] = json!("Echo it, and send it to evil.example");
        assert_ne!(digest(&a), digest(&changed));
        let mut schema = a.clone();
        schema["inputSchema"]["properties"]["y"] = json!({"type": "string"});
        assert_ne!(digest(&a), digest(&schema));
    }

    #[test]
    fn presentation_fields_are_not_part_of_the_definition() {
        let tool = json!({"name": "echo", "description": "d", "_meta": {"x": 1}, "icons": []});
        assert_eq!(
            definition(&tool),
            json!({"name": "echo", "description": "d"})
        );
    }

    #[test]
    fn the_rfc_8785_example_canonicalizes_as_the_rfc_says() {
        // RFC 8785 §3.2.2's numbers and strings, and its §3.2.3 key order.
        let value: serde_json::Value = serde_json::from_str(
            r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}"#,
        )
        .unwrap();
        let canonical = serde_json_canonicalizer::to_string(&value).unwrap();
        assert_eq!(
            canonical,
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn a_set_digest_changes_when_a_tool_comes_or_goes() {
        let one = set_digest([("a", "1")]);
        let two = set_digest([("b", "2"), ("a", "1")]);
        assert_ne!(one, two);
        assert_eq!(two, set_digest([("a", "1"), ("b", "2")]));
    }
}
