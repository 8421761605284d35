//! A server file, or an admin request, into validated [`ServerSpec`]s.

use serde_json::{Map, Value};
use spear_proto::v1::{ServerSpec, VirtualServerSpec};

use super::fields::{kind, parse_entry, Problems, Shape};
use super::official;
use super::problem::Problem;
use super::virtual_server::{is_virtual_server, parse_virtual_server};

/// Files larger than this are rejected unread.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// A registry server.json's companion file: its name and bytes.
#[derive(Debug, Clone, Copy)]
pub struct Companion<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
}

/// Parses one file's bytes, in any shape. `file` names the file in
/// problems. All or nothing: a file with any problem declares nothing.
pub fn parse_file(file: &str, bytes: &[u8]) -> Result<Vec<ServerSpec>, Vec<Problem>> {
    parse_file_with(file, bytes, None)
}

/// What one file of `--mcp-dir` declares.
#[derive(Debug, Clone, PartialEq)]
pub enum Declared {
    Servers(Vec<ServerSpec>),
    /// A virtual server ([`crate::virtual_server`]).
    Virtual(VirtualServerSpec),
}

/// [`parse_file`], with the companion file found beside it (Spear's
/// settings for a registry server.json; refused beside any other shape).
/// A virtual server file is refused: it declares no server.
pub fn parse_file_with(
    file: &str,
    bytes: &[u8],
    companion: Option<Companion<'_>>,
) -> Result<Vec<ServerSpec>, Vec<Problem>> {
    match parse_declared(file, bytes, companion)? {
        Declared::Servers(specs) => Ok(specs),
        Declared::Virtual(spec) => {
            let mut problems = Problems::new(file);
            problems.push(
                "$",
                format!("declares the virtual server '{}', not a server; put it in --mcp-dir beside the servers it offers", spec.name),
            );
            Err(problems.list)
        }
    }
}

/// Parses one file's bytes, in any shape, servers or a virtual server.
pub fn parse_declared(
    file: &str,
    bytes: &[u8],
    companion: Option<Companion<'_>>,
) -> Result<Declared, Vec<Problem>> {
    let mut problems = Problems::new(file);
    let Some(root) = read_json(&mut problems, bytes) else {
        return Err(problems.list);
    };
    if let Value::Object(root) = &root {
        if official::is_registry_file(root) {
            return parse_registry_file(&mut problems, root, companion).map(Declared::Servers);
        }
    }
    if let Some(companion) = companion {
        problems.push(
            "",
            format!(
                "{} sits beside it, but only an official registry server.json takes a companion file; put Spear's settings in {file} itself, or remove {}",
                companion.name, companion.name
            ),
        );
        return Err(problems.list);
    }
    if let Value::Object(root) = &root {
        if is_virtual_server(root) {
            return match parse_virtual_server(&mut problems, root) {
                Some(spec) => Ok(Declared::Virtual(spec)),
                None => Err(problems.list),
            };
        }
    }
    let Value::Object(root) = root else {
        problems.push(
            "$",
            format!(
                "expected an object (one server, or {{\"mcpServers\": {{...}}}}), found {}",
                kind(&root)
            ),
        );
        return Err(problems.list);
    };
    let specs = match shared_key(&root) {
        Some(key) => parse_shared(&mut problems, &root, key),
        None if root.contains_key("id") => {
            parse_entry(&mut problems, "$", &root, Shape::Native, None)
                .into_iter()
                .collect()
        }
        None => {
            problems.push(
                "$",
                "declares no server: a file is either one server with an \"id\" or {\"mcpServers\": {\"<id>\": {...}}}",
            );
            Vec::new()
        }
    };
    if problems.is_empty() {
        Ok(Declared::Servers(specs))
    } else {
        Err(problems.list)
    }
}

/// A registry server.json with its companion's settings, if any.
fn parse_registry_file(
    problems: &mut Problems,
    root: &Map<String, Value>,
    companion: Option<Companion<'_>>,
) -> Result<Vec<ServerSpec>, Vec<Problem>> {
    let settings = match companion {
        None => None,
        Some(companion) => {
            let mut own = Problems::new(companion.name);
            match read_json(&mut own, companion.bytes) {
                Some(Value::Object(settings)) => Some(settings),
                Some(other) => {
                    own.push(
                        "$",
                        format!(
                            "expected an object of Spear's settings, found {}",
                            kind(&other)
                        ),
                    );
                    return Err(own.list);
                }
                None => return Err(own.list),
            }
        }
    };
    let spec = official::parse_registry(problems, root, settings.as_ref());
    match spec {
        Some(spec) if problems.is_empty() => Ok(vec![spec]),
        _ => Err(std::mem::take(&mut problems.list)),
    }
}

/// Parses one server in the native shape (the admin API), with the file rules.
pub fn parse_server_json(origin: &str, json: &str) -> Result<ServerSpec, Vec<Problem>> {
    let mut problems = Problems::new(origin);
    let Some(root) = read_json(&mut problems, json.as_bytes()) else {
        return Err(problems.list);
    };
    let Value::Object(root) = root else {
        problems.push(
            "$",
            format!("expected one server as an object, found {}", kind(&root)),
        );
        return Err(problems.list);
    };
    match parse_entry(&mut problems, "$", &root, Shape::Native, None) {
        Some(spec) if problems.is_empty() => Ok(spec),
        _ => Err(problems.list),
    }
}

/// The file-level checks: size, UTF-8, emptiness, JSON syntax.
fn read_json(problems: &mut Problems, bytes: &[u8]) -> Option<Value> {
    if bytes.len() > MAX_FILE_BYTES {
        problems.push(
            "",
            format!(
                "file is {} bytes; the limit is {MAX_FILE_BYTES}; split it into several files",
                bytes.len()
            ),
        );
        return None;
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            problems.push(
                "",
                format!(
                    "file is not UTF-8 (invalid byte at offset {}); save it as UTF-8",
                    e.valid_up_to()
                ),
            );
            return None;
        }
    };
    if text.trim().is_empty() {
        problems.push("", "file is empty; an empty file is not read as \"no servers\" (delete the file to remove its servers)");
        return None;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Some(value),
        Err(e) => {
            problems.push(
                "",
                format!(
                    "invalid JSON at line {} column {}: {}",
                    e.line(),
                    e.column(),
                    strip_position(&e.to_string())
                ),
            );
            None
        }
    }
}

/// serde_json appends " at line L column C"; we say it first.
fn strip_position(message: &str) -> &str {
    message.find(" at line ").map_or(message, |i| &message[..i])
}

/// `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code).
fn shared_key(root: &Map<String, Value>) -> Option<&'static str> {
    ["mcpServers", "servers"]
        .into_iter()
        .find(|k| root.contains_key(*k))
}

fn parse_shared(problems: &mut Problems, root: &Map<String, Value>, key: &str) -> Vec<ServerSpec> {
    for other in root.keys().filter(|k| k.as_str() != key) {
        problems.push(
            &format!("$.{other}"),
            format!("unknown key '{other}'; a shared-shape file holds only \"{key}\""),
        );
    }
    let Some(servers) = root.get(key) else {
        return Vec::new();
    };
    let Value::Object(servers) = servers else {
        problems.push(
            &format!("$.{key}"),
            format!(
                "expected an object of servers by id, found {}",
                kind(servers)
            ),
        );
        return Vec::new();
    };
    let mut specs = Vec::with_capacity(servers.len());
    for (id, entry) in servers {
        let path = format!("$.{key}.{id}");
        match entry {
            Value::Object(entry) => {
                if let Some(spec) = parse_entry(problems, &path, entry, Shape::Shared, Some(id)) {
                    specs.push(spec);
                }
            }
            other => problems.push(&path, format!("expected an object, found {}", kind(other))),
        }
    }
    specs
}
