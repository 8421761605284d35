//! A tool whose input schema a model could not use is quarantined alone.

use serde_json::Value;

/// Checks that a tool's `inputSchema` is a JSON Schema object of type
/// "object" whose `properties`, if any, is an object; returns why not.
pub fn check_input_schema(schema: &serde_json::Map<String, Value>) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Err(format!("inputSchema.type is {other}, not \"object\"")),
        None => return Err("inputSchema has no \"type\": \"object\"".into()),
    }
    if let Some(properties) = schema.get("properties") {
        if !properties.is_object() {
            return Err("inputSchema.properties is not an object".into());
        }
    }
    if let Some(required) = schema.get("required") {
        if !required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string))
        {
            return Err("inputSchema.required is not an array of names".into());
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
