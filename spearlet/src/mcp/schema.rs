//! A tool whose input schema a model could not use is quarantined alone.

use serde_json::Value;

/// Why a tool's `inputSchema` cannot be offered to a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("inputSchema.type is {0}, not \"object\"")]
    NotObjectType(String),
    #[error("inputSchema has no \"type\": \"object\"")]
    NoType,
    #[error("inputSchema.properties is not an object")]
    Properties,
    #[error("inputSchema.required is not an array of names")]
    Required,
}

/// Checks that a tool's `inputSchema` is a JSON Schema object of type
/// "object" whose `properties`, if any, is an object.
pub fn check_input_schema(schema: &serde_json::Map<String, Value>) -> Result<(), SchemaError> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            let shown = spear_common::text::prefix(&other.to_string(), 100).to_string();
            return Err(SchemaError::NotObjectType(shown));
        }
        None => return Err(SchemaError::NoType),
    }
    if schema.get("properties").is_some_and(|p| !p.is_object()) {
        return Err(SchemaError::Properties);
    }
    if let Some(required) = schema.get("required") {
        if !required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string))
        {
            return Err(SchemaError::Required);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn schemas() {
        assert!(check_input_schema(&obj(
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        ))
        .is_ok());
        assert!(check_input_schema(&obj(json!({"type": "array"}))).is_err());
        assert!(check_input_schema(&obj(json!({}))).is_err());
        assert!(check_input_schema(&obj(json!({"type": "object", "properties": []}))).is_err());
        assert!(check_input_schema(&obj(json!({"type": "object", "required": "a"}))).is_err());
    }
}
