//! One server entry (a JSON object) into a [`ServerSpec`], collecting every
//! problem with its JSON path.

use serde_json::{Map, Value};
use spear_proto::v1::{
    ApprovalRule, Elicitation, Limits, ServerSpec, Timeouts, ToolPatterns, Transport,
};

use super::ids::check_server_id;
use super::values::{
    boolean, bounded, object, patterns, string, string_list, string_map, unknown_keys, MapKind,
};
pub use super::values::{kind, Problems};
use spear_proto::pins::PinMode;
use spear_proto::refs::{check_references, starts_with_reference};

/// Keys both shapes share: everything but how the id and the on/off
/// switch are written.
const COMMON_KEYS: &[&str] = &[
    "description",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "allowed_tools",
    "denied_tools",
    "timeouts_ms",
    "limits",
    "enabled",
    "elicitation",
    "auth",
    "nodes",
    "pin",
    "approval",
    "sandbox",
    "quota",
];
/// Keys only the native (one server per file) shape has.
const NATIVE_ONLY: &[&str] = &["id"];
/// Keys only an entry of `mcpServers` has (its id is the entry's name):
/// the spellings other MCP clients use.
const SHARED_ONLY: &[&str] = &["type", "disabled"];

/// Keys a server of `shape` may have.
pub fn keys(shape: Shape) -> Vec<&'static str> {
    let only = match shape {
        Shape::Native => NATIVE_ONLY,
        Shape::Shared => SHARED_ONLY,
    };
    only.iter().chain(COMMON_KEYS).copied().collect()
}
const TIMEOUT_KEYS: &[&str] = &["startup", "list_tools", "call", "call_max", "relist"];
const APPROVAL_KEYS: &[&str] = &["tools", "expires_ms"];
const LIMIT_KEYS: &[&str] = &["max_concurrency", "max_output_bytes", "max_tools"];

pub const MAX_DESCRIPTION: usize = 1024;
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
pub const MAX_CONCURRENCY: u64 = 1024;
pub const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// `limits.max_tools` at most: a node reads 4 KiB of list per tool allowed.
pub const MAX_TOOLS: u64 = 100_000;

/// Which shape the entry comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Native,
    Shared,
}

/// Parses one server entry at `path`. `id` is given for shared entries.
pub fn parse_entry(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    shape: Shape,
    id_from_key: Option<&str>,
) -> Option<ServerSpec> {
    let before = problems.list.len();
    unknown_keys(problems, path, entry, &keys(shape));

    let id = match (shape, id_from_key) {
        (Shape::Shared, Some(id)) => {
            if let Err(message) = check_server_id(id) {
                problems.push(path, message.to_string());
            }
            id.to_string()
        }
        _ => match entry.get("id") {
            Some(Value::String(id)) => {
                if let Err(message) = check_server_id(id) {
                    problems.push(&format!("{path}.id"), message.to_string());
                }
                id.clone()
            }
            Some(other) => {
                problems.push(
                    &format!("{path}.id"),
                    format!("expected a string, found {}", kind(other)),
                );
                String::new()
            }
            None => {
                problems.push(path, "missing \"id\"; every server needs one");
                String::new()
            }
        },
    };

    let mut spec = ServerSpec {
        id,
        enabled: true,
        ..Default::default()
    };
    spec.description = string(problems, path, entry, "description").unwrap_or_default();
    if spec.description.chars().count() > MAX_DESCRIPTION {
        problems.push(
            &format!("{path}.description"),
            format!("is longer than {MAX_DESCRIPTION} characters"),
        );
    }
    spec.command = string(problems, path, entry, "command").unwrap_or_default();
    spec.cwd = string(problems, path, entry, "cwd").unwrap_or_default();
    spec.url = string(problems, path, entry, "url").unwrap_or_default();
    spec.args = string_list(problems, path, entry, "args", true).unwrap_or_default();
    spec.env = string_map(problems, path, entry, "env", MapKind::Env).unwrap_or_default();
    spec.headers =
        string_map(problems, path, entry, "headers", MapKind::Header).unwrap_or_default();
    spec.allowed_tools =
        patterns(problems, path, entry, "allowed_tools").map(|patterns| ToolPatterns { patterns });
    spec.denied_tools = patterns(problems, path, entry, "denied_tools").unwrap_or_default();
    spec.timeouts = timeouts(problems, path, entry);
    spec.limits = limits(problems, path, entry);
    spec.enabled = enabled(problems, path, entry);
    spec.elicitation = elicitation(problems, path, entry) as i32;
    spec.transport = transport(problems, path, entry, &spec) as i32;
    check_transport_fields(problems, path, entry, &spec);
    spec.auth = super::auth::auth(problems, path, entry, &spec);
    spec.nodes = patterns(problems, path, entry, "nodes").unwrap_or_default();
    spec.pin = pin(problems, path, entry);
    spec.approval = approval(problems, path, entry);
    spec.sandbox = super::sandbox::sandbox(problems, path, entry, &spec);
    spec.quota = super::quota::quota(problems, path, entry);
    if !spec.url.is_empty() {
        if let Err(message) = check_references(&spec.url) {
            problems.push(&format!("{path}.url"), message.to_string());
        }
    }
    (problems.list.len() == before).then_some(spec)
}

/// `"approval"`: the tools a person approves call by call, and how long a
/// call may wait for it.
fn approval(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
) -> Option<ApprovalRule> {
    let object = object(problems, path, entry, "approval", APPROVAL_KEYS)?;
    let at = format!("{path}.approval");
    let tools = patterns(problems, &at, object, "tools").unwrap_or_default();
    if tools.is_empty() {
        problems.push(
            &at,
            "\"tools\" is missing or empty: list the tools (patterns) whose calls need an approval",
        );
    }
    let max = spear_proto::approvals::MAX_EXPIRY.as_millis() as u64;
    let expires_ms = number(problems, &at, object, "expires_ms", max, "milliseconds");
    Some(ApprovalRule { tools, expires_ms })
}

/// `"pin"`: how the server's tool definitions are pinned.
fn pin(problems: &mut Problems, path: &str, entry: &Map<String, Value>) -> String {
    let name = string(problems, path, entry, "pin").unwrap_or_default();
    match PinMode::parse(&name) {
        Some(_) => name,
        None => {
            problems.push(
                &format!("{path}.pin"),
                format!(
                    "'{name}' is not a pin mode; use one of {} (see docs/trust.md)",
                    PinMode::NAMES.join(", ")
                ),
            );
            String::new()
        }
    }
}

fn timeouts(problems: &mut Problems, path: &str, entry: &Map<String, Value>) -> Option<Timeouts> {
    let object = object(problems, path, entry, "timeouts_ms", TIMEOUT_KEYS)?;
    let at = format!("{path}.timeouts_ms");
    let mut get =
        |key: &str| number(problems, &at, object, key, MAX_TIMEOUT_MS, "milliseconds") as u32;
    Some(Timeouts {
        startup_ms: get("startup"),
        list_tools_ms: get("list_tools"),
        call_ms: get("call"),
        call_max_ms: get("call_max"),
        relist_ms: get("relist"),
    })
}

/// `"elicitation"`: what the node answers a server asking for input
/// mid-call. Absent means decline, the only safe answer with no one there.
fn elicitation(problems: &mut Problems, path: &str, entry: &Map<String, Value>) -> Elicitation {
    match string(problems, path, entry, "elicitation").as_deref() {
        None | Some("decline") => Elicitation::Decline,
        Some("accept_defaults") => Elicitation::AcceptDefaults,
        Some(other) => {
            problems.push(
                &format!("{path}.elicitation"),
                format!(
                    "unknown elicitation policy '{}'; use decline or accept_defaults",
                    other.escape_default()
                ),
            );
            Elicitation::Decline
        }
    }
}

fn limits(problems: &mut Problems, path: &str, entry: &Map<String, Value>) -> Option<Limits> {
    let object = object(problems, path, entry, "limits", LIMIT_KEYS)?;
    let at = format!("{path}.limits");
    Some(Limits {
        max_concurrency: number(
            problems,
            &at,
            object,
            "max_concurrency",
            MAX_CONCURRENCY,
            "calls",
        ) as u32,
        max_output_bytes: number(
            problems,
            &at,
            object,
            "max_output_bytes",
            MAX_OUTPUT_BYTES,
            "bytes",
        ),
        max_tools: number(problems, &at, object, "max_tools", MAX_TOOLS, "tools") as u32,
    })
}

/// `object[key]` (under `at`) as a whole number up to `max` `unit`; 0,
/// "not set", when it is absent.
fn number(
    problems: &mut Problems,
    at: &str,
    object: &Map<String, Value>,
    key: &str,
    max: u64,
    unit: &str,
) -> u64 {
    object
        .get(key)
        .map(|v| bounded(problems, &format!("{at}.{key}"), v, max, unit))
        .unwrap_or(0)
}

fn enabled(problems: &mut Problems, path: &str, entry: &Map<String, Value>) -> bool {
    let enabled = boolean(problems, path, entry, "enabled");
    let disabled = boolean(problems, path, entry, "disabled");
    match (enabled, disabled) {
        (Some(e), Some(d)) if e == d => {
            problems.push(
                &format!("{path}.disabled"),
                "contradicts \"enabled\"; keep only one of them",
            );
            e
        }
        (Some(e), _) => e,
        (None, Some(d)) => !d,
        (None, None) => true,
    }
}

fn transport(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    spec: &ServerSpec,
) -> Transport {
    let declared = string(problems, path, entry, "transport").map(|t| ("transport", t));
    let typed = string(problems, path, entry, "type").map(|t| ("type", t));
    let parse = |key: &str, value: &str| -> Option<Transport> {
        match (key, value) {
            (_, "stdio") => Some(Transport::Stdio),
            (_, "streamable_http") | ("type", "http") | ("type", "streamable-http") => {
                Some(Transport::StreamableHttp)
            }
            (_, "sse") => Some(Transport::Sse),
            _ => None,
        }
    };
    let mut chosen = None;
    for (key, value) in [declared, typed].into_iter().flatten() {
        match parse(key, &value) {
            Some(t) => {
                if chosen.is_some_and(|c| c != t) {
                    problems.push(
                        &format!("{path}.{key}"),
                        "contradicts the other transport setting; keep only one",
                    );
                }
                chosen = Some(t);
            }
            None => {
                let allowed = if key == "type" {
                    "stdio, http, streamable_http or sse"
                } else {
                    "stdio, streamable_http or sse"
                };
                problems.push(
                    &format!("{path}.{key}"),
                    format!(
                        "unknown transport '{}'; use {allowed}",
                        value.escape_default()
                    ),
                );
            }
        }
    }
    if let Some(t) = chosen {
        return t;
    }
    match (entry.contains_key("command"), entry.contains_key("url")) {
        (true, false) => Transport::Stdio,
        (false, true) => Transport::StreamableHttp,
        (true, true) => {
            problems.push(path, "has both \"command\" and \"url\"; a server is either a local command (stdio) or a remote URL");
            Transport::Unspecified
        }
        (false, false) => {
            let _ = spec;
            problems.push(
                path,
                "has neither \"command\" (a local stdio server) nor \"url\" (a remote server)",
            );
            Transport::Unspecified
        }
    }
}

fn check_transport_fields(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    spec: &ServerSpec,
) {
    match Transport::try_from(spec.transport).unwrap_or(Transport::Unspecified) {
        Transport::Stdio => {
            if spec.command.trim().is_empty() && entry.get("command").is_none_or(Value::is_string) {
                problems.push(
                    &format!("{path}.command"),
                    "a stdio server needs a non-empty \"command\"",
                );
            }
            for key in ["url", "headers"] {
                if entry.contains_key(key) {
                    problems.push(&format!("{path}.{key}"), format!("\"{key}\" is for remote servers; a stdio server uses command, args and env"));
                }
            }
        }
        Transport::StreamableHttp | Transport::Sse => {
            let url = spec.url.as_str();
            if url.is_empty() && entry.get("url").is_none_or(Value::is_string) {
                problems.push(&format!("{path}.url"), "a remote server needs a \"url\"");
            } else if !(url.is_empty()
                || url.starts_with("http://")
                || url.starts_with("https://")
                || starts_with_reference(url))
            {
                problems.push(
                    &format!("{path}.url"),
                    "must start with http:// or https://",
                );
            }
            for key in ["command", "args", "env", "cwd"] {
                if entry.contains_key(key) {
                    problems.push(
                        &format!("{path}.{key}"),
                        format!(
                            "\"{key}\" is for stdio servers; a remote server uses url and headers"
                        ),
                    );
                }
            }
        }
        Transport::Unspecified => {}
    }
}
