//! Every key a task config knows, by section, so a config with typos is
//! refused naming all of them at once, each with the key it was probably
//! meant to be (serde stops at the first, and does not guess).

use serde::de::{DeserializeOwned, Deserializer, Visitor};
use serde_json::Value;

use super::{LlmChoice, McpConfig, TaskConfig, TaskLimits, WasiGrants};
use crate::quota::TaskQuota;
use crate::suggest::closest;

/// (section, its keys); "" is the top level. The keys are the ones serde
/// reads for each section's type, so this list cannot drift from them.
fn sections() -> [(&'static str, &'static [&'static str]); 6] {
    [
        ("", fields_of::<TaskConfig>()),
        ("mcp", fields_of::<McpConfig>()),
        ("llm", fields_of::<LlmChoice>()),
        ("limits", fields_of::<TaskLimits>()),
        ("wasi", fields_of::<WasiGrants>()),
        ("quota", fields_of::<TaskQuota>()),
    ]
}

/// The field names a derived `Deserialize` of a struct reads: it hands
/// them to `deserialize_struct`, which this deserializer answers by
/// returning them (as its error) instead of reading anything.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    match T::deserialize(Fields) {
        Err(Found(fields)) => fields,
        Ok(_) => &[],
    }
}

struct Fields;

#[derive(Debug)]
struct Found(&'static [&'static str]);

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fields {:?}", self.0)
    }
}

impl std::error::Error for Found {}

impl serde::de::Error for Found {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Found(&[])
    }
}

impl<'de> Deserializer<'de> for Fields {
    type Error = Found;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Found> {
        Err(Found(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// Each unknown key of `config`, as `path` and what it may have meant.
pub fn unknown_keys(config: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    for (section, keys) in sections() {
        let object = if section.is_empty() {
            config.as_object()
        } else {
            config.get(section).and_then(Value::as_object)
        };
        for key in object.into_iter().flat_map(|o| o.keys()) {
            if keys.contains(&key.as_str()) {
                continue;
            }
            let path = if section.is_empty() {
                key.clone()
            } else {
                format!("{section}.{key}")
            };
            let printable: String = path
                .chars()
                .take(64)
                .flat_map(char::escape_default)
                .collect();
            unknown.push(match closest(key, keys) {
                Some(meant) => format!("'{printable}' (did you mean '{meant}'?)"),
                None => format!("'{printable}'"),
            });
        }
    }
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_section_reads_the_keys_its_type_has() {
        let sections = sections();
        let top: Vec<&str> = sections[0].1.to_vec();
        for (section, keys) in &sections[1..] {
            assert!(top.contains(section), "{section} is a key of the config");
            assert!(!keys.is_empty(), "{section}");
        }
        assert!(sections[5].1.contains(&"on_unreachable"));
        assert!(sections[3].1.contains(&"wall_ms"));
    }
}
