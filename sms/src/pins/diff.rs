//! `sms pins diff`: what changed in a server's tools, as a readable
//! unified diff of the definitions (pretty JSON, so a description's words
//! and a schema's keys each show on their own line), and on which nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;

use spear_proto::v1::ServerRecord;

/// The diff of every tool some node sees differently from the pin (or of
/// `tool` only), naming the nodes that see each version.
pub fn render_diff(
    record: &ServerRecord,
    nodes: &BTreeMap<String, BTreeMap<String, String>>,
    definitions: &HashMap<String, String>,
    tool: Option<&str>,
) -> String {
    let server = record.spec.as_ref().map(|s| s.id.as_str()).unwrap_or("");
    let names: BTreeSet<&String> = nodes
        .values()
        .flat_map(|t| t.keys())
        .filter(|name| tool.is_none_or(|t| t == name.as_str()))
        .collect();
    let mut out = String::new();
    for name in names {
        let pinned = record.pins.as_ref().and_then(|p| p.tools.get(name));
        // digest → the nodes that see it
        let mut versions: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
        for (node, tools) in nodes {
            if let Some(digest) = tools.get(name) {
                versions.entry(digest).or_default().push(node);
            }
        }
        let changed: Vec<(&String, &Vec<&String>)> = versions
            .iter()
            .filter(|(digest, _)| Some(**digest) != pinned)
            .map(|(d, n)| (*d, n))
            .collect();
        if changed.is_empty() {
            continue;
        }
        if versions.len() > 1 {
            let _ = writeln!(
                out,
                "NOTE: nodes see {} different definitions of tool '{name}' of server '{server}'",
                versions.len()
            );
        }
        let before = pinned.map(|d| pretty(definitions.get(d)));
        for (digest, seen_on) in changed {
            let on = seen_on
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            let _ = match pinned {
                Some(p) => writeln!(
                    out,
                    "tool '{name}' of server '{server}' changed on {on}: definition {} (pinned {})",
                    short(digest),
                    short(p)
                ),
                None => writeln!(
                    out,
                    "tool '{name}' of server '{server}' is not pinned; seen on {on}: definition {}",
                    short(digest)
                ),
            };
            let after = pretty(definitions.get(digest));
            let before = before.clone().unwrap_or_default();
            let diff = similar::TextDiff::from_lines(&before, &after);
            let _ = write!(
                out,
                "{}",
                diff.unified_diff()
                    .context_radius(3)
                    .header("pinned", &format!("seen on {on}"))
            );
            out.push('\n');
        }
    }
    if out.is_empty() {
        out = format!("every node sees the pinned tools of server '{server}'\n");
    }
    out
}

/// A definition as indented JSON, a line per key; a note when this SMS
/// has not kept it (pinned before it last started).
fn pretty(definition: Option<&String>) -> String {
    match definition.and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok()) {
        Some(value) => {
            let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
            text.push('\n');
            text
        }
        None => "(this SMS has not kept this definition since it last started)\n".to_string(),
    }
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}
