//! A virtual server file: the registry's tools a northbound MCP client
//! sees as one server (docs/virtual-servers.md). A shape of its own, told
//! from the server shapes by its `"virtual_server"` key, read with the same
//! rules: every problem at once with its JSON path, unknown keys refused
//! with the key they were probably meant to be.
//!
//! What a file can be checked for alone is checked here: its name, each
//! offer's server id, patterns and aliases, the invokers. Whether the
//! servers exist and what their tools are called is known only against the
//! registry; the names tools get are `spear_proto::exposed`'s.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};
use spear_proto::exposed::{is_valid_name, MAX_NAME_LEN};
use spear_proto::principal::Invoker;
use spear_proto::v1::{ToolPatterns, VirtualOffer, VirtualServerSpec};

use super::ids::check_server_id;
use super::values::{boolean, kind, patterns, string, string_list, unknown_keys, Problems};

/// The key that makes a file a virtual server.
pub const KEY: &str = "virtual_server";
const KEYS: &[&str] = &[KEY, "description", "offers", "invokers", "tool_search"];
const OFFER_KEYS: &[&str] = &["server", "tools", "aliases"];
/// Offers one virtual server may make (a server at most once each).
pub const MAX_OFFERS: usize = 256;
const MAX_DESCRIPTION: usize = 1024;

/// Whether a file's root declares a virtual server.
pub fn is_virtual_server(root: &Map<String, Value>) -> bool {
    root.contains_key(KEY)
}

/// Reads a virtual server declaration from a file's root object; `None`
/// when it has problems (all of them in `problems`).
pub fn parse_virtual_server(
    problems: &mut Problems,
    root: &Map<String, Value>,
) -> Option<VirtualServerSpec> {
    let before = problems.list.len();
    unknown_keys(problems, "$", root, KEYS);
    let spec = VirtualServerSpec {
        name: name(problems, root),
        description: description(problems, root),
        offers: offers(problems, root),
        invokers: invokers(problems, root),
        tool_search: boolean(problems, "$", root, "tool_search").unwrap_or(false),
    };
    (problems.list.len() == before).then_some(spec)
}

fn name(problems: &mut Problems, root: &Map<String, Value>) -> String {
    let path = format!("$.{KEY}");
    match root.get(KEY) {
        Some(Value::String(name)) if check_server_id(name).is_ok() => name.clone(),
        Some(Value::String(name)) => {
            let shown = escaped(name);
            problems.push(
                &path,
                format!("'{shown}' is not a virtual server name: use 1 to 63 lowercase letters, digits, '-' and '_', starting with a letter or digit (it is part of the URL /v/<name>/mcp)"),
            );
            String::new()
        }
        Some(other) => {
            problems.push(
                &path,
                format!(
                    "expected the virtual server's name as a string, found {}",
                    kind(other)
                ),
            );
            String::new()
        }
        None => String::new(),
    }
}

fn description(problems: &mut Problems, root: &Map<String, Value>) -> String {
    let description = string(problems, "$", root, "description").unwrap_or_default();
    if description.chars().count() > MAX_DESCRIPTION {
        problems.push(
            "$.description",
            format!("is longer than {MAX_DESCRIPTION} characters"),
        );
    }
    description
}

fn offers(problems: &mut Problems, root: &Map<String, Value>) -> Vec<VirtualOffer> {
    let items = match root.get("offers") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) | None => {
            problems.push(
                "$",
                "offers no tools: add \"offers\": [{\"server\": \"<server id>\"}] naming the servers whose tools it serves",
            );
            return Vec::new();
        }
        Some(other) => {
            problems.push(
                "$.offers",
                format!("expected an array of offers, found {}", kind(other)),
            );
            return Vec::new();
        }
    };
    if items.len() > MAX_OFFERS {
        problems.push(
            "$.offers",
            format!("makes {} offers; the limit is {MAX_OFFERS}", items.len()),
        );
        return Vec::new();
    }
    let mut seen = BTreeSet::new();
    let mut offers = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("$.offers[{i}]");
        let Value::Object(entry) = item else {
            problems.push(
                &path,
                format!(
                    "expected an offer ({{\"server\": \"<id>\", \"tools\": [...]}}), found {}",
                    kind(item)
                ),
            );
            continue;
        };
        let Some(offer) = offer(problems, &path, entry) else {
            continue;
        };
        if !seen.insert(offer.server_id.clone()) {
            problems.push(
                &format!("{path}.server"),
                format!("server '{}' is offered twice; put all of its patterns and aliases in one offer", offer.server_id),
            );
        }
        offers.push(offer);
    }
    offers
}

fn offer(problems: &mut Problems, path: &str, entry: &Map<String, Value>) -> Option<VirtualOffer> {
    unknown_keys(problems, path, entry, OFFER_KEYS);
    let server_id = match string(problems, path, entry, "server") {
        Some(id) => match check_server_id(&id) {
            Ok(()) => id,
            Err(error) => {
                problems.push(&format!("{path}.server"), error.to_string());
                return None;
            }
        },
        None if entry.contains_key("server") => return None,
        None => {
            problems.push(
                path,
                "missing \"server\": the id of the server whose tools this offers",
            );
            return None;
        }
    };
    let tools = patterns(problems, path, entry, "tools").map(|patterns| ToolPatterns { patterns });
    let aliases = aliases(problems, &format!("{path}.aliases"), entry.get("aliases"));
    Some(VirtualOffer {
        server_id,
        tools,
        aliases: aliases.into_iter().collect(),
    })
}

/// `{"<upstream tool>": "<name clients see>"}`: each alias a valid name,
/// no two tools under one.
fn aliases(problems: &mut Problems, path: &str, value: Option<&Value>) -> BTreeMap<String, String> {
    let Some(value) = value else {
        return BTreeMap::new();
    };
    let Value::Object(map) = value else {
        problems.push(
            path,
            format!(
                "expected an object of upstream tool name to alias, found {}",
                kind(value)
            ),
        );
        return BTreeMap::new();
    };
    let mut aliases = BTreeMap::new();
    let mut taken: BTreeMap<&str, &str> = BTreeMap::new();
    for (tool, alias) in map {
        let at = format!("{path}.{tool}");
        let Value::String(alias) = alias else {
            problems.push(
                &at,
                format!("expected the alias as a string, found {}", kind(alias)),
            );
            continue;
        };
        if !is_valid_name(alias) {
            let shown = escaped(alias);
            problems.push(
                &at,
                format!("'{shown}' is not a tool name clients accept: use 1 to {MAX_NAME_LEN} letters, digits, '_' and '-'"),
            );
            continue;
        }
        if let Some(first) = taken.insert(alias, tool) {
            problems.push(
                &at,
                format!("'{alias}' is already the alias of '{first}'; give each tool its own"),
            );
            continue;
        }
        aliases.insert(tool.clone(), alias.clone());
    }
    aliases
}

fn invokers(problems: &mut Problems, root: &Map<String, Value>) -> Vec<String> {
    let invokers = string_list(problems, "$", root, "invokers", false).unwrap_or_default();
    for (i, entry) in invokers.iter().enumerate() {
        if let Err(error) = Invoker::parse(entry) {
            problems.push(&format!("$.invokers[{i}]"), error.to_string());
        }
    }
    invokers
}

/// The operator's text as a sentence may hold it: cut, controls escaped.
fn escaped(text: &str) -> String {
    text.chars()
        .take(80)
        .flat_map(char::escape_default)
        .collect()
}
