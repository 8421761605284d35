//! Every key a task config knows, by section, so a config with typos is
//! refused naming all of them at once, each with the key it was probably
//! meant to be (serde stops at the first, and does not guess).

use serde_json::Value;

use crate::suggest::closest;

/// (section, its keys); "" is the top level.
const SECTIONS: &[(&str, &[&str])] = &[
    ("", &["mcp", "llm", "limits", "wasi", "invokers", "quota"]),
    (
        "mcp",
        &[
            "enabled",
            "allowed_server_ids",
            "default_server_ids",
            "task_tool_allowlist",
            "task_tool_denylist",
            "task_tool_approval",
        ],
    ),
    (
        "llm",
        &["backend", "model", "allowed_backends", "allowed_models"],
    ),
    (
        "limits",
        &[
            "memory_mb",
            "cpu_ms",
            "wall_ms",
            "max_sessions",
            "max_iterations",
            "max_total_tool_calls",
            "output_bytes",
            "host_memory_mb",
            "max_model_requests",
            "max_tokens",
            "max_tool_calls",
        ],
    ),
    ("wasi", &["args", "env", "dirs"]),
    (
        "quota",
        &[
            "tool_calls",
            "model_tokens",
            "cost_usd",
            "per_principal",
            "on_unreachable",
        ],
    ),
];

/// Each unknown key of `config`, as `path` and what it may have meant.
pub fn unknown_keys(config: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    for (section, keys) in SECTIONS {
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
