//! What nodes and SMS agree on about approvals bound to one call: the
//! digest of a call's arguments and how long an approval may wait.

use std::time::Duration;

/// How long an approval waits for a decision when its rule says nothing.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(300);
/// The longest an approval may wait, whatever its rule says.
pub const MAX_EXPIRY: Duration = Duration::from_secs(3600);

/// SHA-256 (hex) of a call's arguments as RFC 8785 canonical JSON, so the
/// same arguments written with other spacing or key order are the same
/// call, and any changed value is another. `arguments` is the JSON text
/// the model wrote (empty means no arguments: `{}`).
pub fn arguments_digest(arguments: &str) -> Option<String> {
    let value: serde_json::Value = match arguments.trim() {
        "" => serde_json::Value::Object(Default::default()),
        text => serde_json::from_str(text).ok()?,
    };
    Some(crate::pins::digest(&value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_does_not_change_the_digest_and_a_value_does() {
        let a = arguments_digest(r#"{"path": "/a", "mode": 1}"#).unwrap();
        let b = arguments_digest(r#"{ "mode":1.0,"path":"/a" }"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, arguments_digest(r#"{"path": "/b", "mode": 1}"#).unwrap());
        assert_eq!(arguments_digest(""), arguments_digest("{}"));
        assert_eq!(arguments_digest("{not json"), None);
    }
}
