//! Tool definition pins, SMS's side (docs/trust.md).
//!
//! The pins themselves live in each server's registry record (so they
//! reach every node over the watch, are kept in etcd when SMS is, and
//! survive restarts and failover). This module keeps what nodes report
//! they see ([`PinBook`]) and decides what an operator's command does with
//! it: the first sight of a "first-seen" server becomes its pin, `diff`
//! shows what changed and where, `approve` makes what nodes see the pin.

mod diff;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use parking_lot::Mutex;
use spear_proto::pins::{definition, digest, PinMode};
use spear_proto::v1::{PinState, SeenTool, ServerRecord, ToolPins};

pub use diff::render_diff;

/// Tools one report may carry.
pub const MAX_TOOLS: usize = 1000;
/// Bytes of one tool definition.
pub const MAX_DEFINITION: usize = 64 * 1024;
/// Definitions kept for diffs; past it, the oldest are forgotten.
const MAX_DEFINITIONS: usize = 20_000;

/// Why a report or a command is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PinError {
    #[error("a report may carry at most {MAX_TOOLS} tools; this one has {0}")]
    TooManyTools(usize),
    #[error("the definition of tool '{0}' is larger than {MAX_DEFINITION} bytes")]
    TooLarge(String),
    #[error("the definition of tool '{0}' is not JSON")]
    NotJson(String),
    #[error("the definition of tool '{tool}' does not hash to the digest reported for it ({digest}); nothing was recorded")]
    WrongDigest { tool: String, digest: String },
    #[error("server '{0}' is not in the registry")]
    UnknownServer(String),
    #[error("no node has reported the tools of server '{0}' yet; use the server on a node first")]
    NothingSeen(String),
    #[error("no node has reported tool '{tool}' of server '{server}'")]
    ToolNotSeen { server: String, tool: String },
    #[error("node '{node}' has reported nothing for server '{server}'")]
    NodeNotSeen { server: String, node: String },
    #[error("nodes see different definitions of tool '{tool}' of server '{server}' ({nodes}); approve one node's with --node NODE after `sms pins diff {server} {tool}`")]
    Disagree {
        server: String,
        tool: String,
        nodes: String,
    },
}

/// What each node reports its servers list, and the definitions behind
/// the digests.
#[derive(Default)]
pub struct PinBook {
    inner: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    /// server → node → tool → digest, as last reported.
    seen: HashMap<String, BTreeMap<String, BTreeMap<String, String>>>,
    /// digest → the definition's JSON.
    definitions: HashMap<String, String>,
    /// (server, tool, digest) an operator rejected.
    rejected: BTreeSet<(String, String, String)>,
}

impl PinBook {
    /// Records `node`'s report for `server`, after checking every
    /// definition it carries hashes to its digest.
    pub fn observe(&self, node: &str, server: &str, tools: &[SeenTool]) -> Result<(), PinError> {
        if tools.len() > MAX_TOOLS {
            return Err(PinError::TooManyTools(tools.len()));
        }
        let mut checked = Vec::new();
        for tool in tools.iter().filter(|t| !t.definition.is_empty()) {
            if tool.definition.len() > MAX_DEFINITION {
                return Err(PinError::TooLarge(tool.name.clone()));
            }
            let value: serde_json::Value = serde_json::from_str(&tool.definition)
                .map_err(|_| PinError::NotJson(tool.name.clone()))?;
            let checked_digest = tool.redacted || digest(&definition(&value)) == tool.digest;
            if !checked_digest || value["name"] != tool.name.as_str() {
                return Err(PinError::WrongDigest {
                    tool: tool.name.clone(),
                    digest: tool.digest.clone(),
                });
            }
            checked.push((tool.digest.clone(), tool.definition.clone()));
        }
        let mut book = self.inner.lock();
        if book.definitions.len() + checked.len() > MAX_DEFINITIONS {
            book.definitions.clear();
        }
        book.definitions.extend(checked);
        let listed = tools
            .iter()
            .map(|t| (t.name.clone(), t.digest.clone()))
            .collect();
        book.seen
            .entry(server.to_string())
            .or_default()
            .insert(node.to_string(), listed);
        Ok(())
    }

    /// The pins a first sight makes: every tool as `tools` lists it.
    pub fn first_pins(tools: &[SeenTool]) -> ToolPins {
        ToolPins {
            tools: tools
                .iter()
                .map(|t| (t.name.clone(), t.digest.clone()))
                .collect(),
        }
    }

    /// The pins that approve what nodes see now: of every tool, or of
    /// `tool` only (the others keep their pins), as `node` sees it when
    /// given, else as every node agrees.
    pub fn approval(
        &self,
        record: &ServerRecord,
        tool: Option<&str>,
        node: Option<&str>,
    ) -> Result<ToolPins, PinError> {
        let server = record.spec.as_ref().map(|s| s.id.as_str()).unwrap_or("");
        let book = self.inner.lock();
        let nodes = book
            .seen
            .get(server)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| PinError::NothingSeen(server.to_string()))?;
        let chosen: Vec<&BTreeMap<String, String>> = match node {
            Some(node) => vec![nodes.get(node).ok_or_else(|| PinError::NodeNotSeen {
                server: server.to_string(),
                node: node.to_string(),
            })?],
            None => nodes.values().collect(),
        };
        let agreed = |name: &str| -> Result<Option<String>, PinError> {
            let digests: BTreeSet<&String> = chosen.iter().filter_map(|t| t.get(name)).collect();
            match digests.len() {
                0 => Ok(None),
                1 => Ok(digests.into_iter().next().cloned()),
                _ => Err(PinError::Disagree {
                    server: server.to_string(),
                    tool: name.to_string(),
                    nodes: describe_nodes(nodes, name),
                }),
            }
        };
        match tool {
            Some(name) => {
                let digest = agreed(name)?.ok_or_else(|| PinError::ToolNotSeen {
                    server: server.to_string(),
                    tool: name.to_string(),
                })?;
                let mut pins = record.pins.clone().unwrap_or_default();
                pins.tools.insert(name.to_string(), digest);
                Ok(pins)
            }
            None => {
                let names: BTreeSet<&String> = chosen.iter().flat_map(|t| t.keys()).collect();
                let mut pins = ToolPins::default();
                for name in names {
                    if let Some(digest) = agreed(name)? {
                        pins.tools.insert(name.clone(), digest);
                    }
                }
                Ok(pins)
            }
        }
    }

    /// Marks what nodes see of `tool` (every drifted tool when `None`) as
    /// rejected: the pin stands, and the change is no longer listed as
    /// waiting. Returns how many definitions were rejected.
    pub fn reject(&self, record: &ServerRecord, tool: Option<&str>) -> usize {
        let server = record
            .spec
            .as_ref()
            .map(|s| s.id.clone())
            .unwrap_or_default();
        let mut book = self.inner.lock();
        let drifted: Vec<(String, String)> = book
            .seen
            .get(&server)
            .into_iter()
            .flat_map(|nodes| nodes.values())
            .flat_map(|tools| tools.iter())
            .filter(|(name, _)| tool.is_none_or(|t| t == name.as_str()))
            .filter(|(name, digest)| pinned(record, name) != Some(digest.as_str()))
            .map(|(name, digest)| (name.clone(), digest.clone()))
            .collect();
        let before = book.rejected.len();
        for (name, digest) in drifted {
            book.rejected.insert((server.clone(), name, digest));
        }
        book.rejected.len() - before
    }

    /// `sms pins list`'s line for `record`.
    pub fn state(&self, record: &ServerRecord) -> PinState {
        let spec = record.spec.clone().unwrap_or_default();
        let book = self.inner.lock();
        let mut drifted = BTreeSet::new();
        let mut rejected = BTreeSet::new();
        let mut disagreeing = BTreeSet::new();
        if let Some(nodes) = book.seen.get(&spec.id) {
            for tools in nodes.values() {
                for (name, digest) in tools {
                    if pinned(record, name) == Some(digest.as_str()) {
                        continue;
                    }
                    let key = (spec.id.clone(), name.clone(), digest.clone());
                    if book.rejected.contains(&key) {
                        rejected.insert(name.clone());
                    } else {
                        drifted.insert(name.clone());
                    }
                }
            }
            // tool -> digest -> the nodes that see it: a tool seen in more
            // than one version puts all its nodes among the disagreeing
            // (one pass, not every node against every other).
            let mut versions: HashMap<&str, BTreeMap<&str, Vec<&str>>> = HashMap::new();
            for (node, tools) in nodes {
                for (name, digest) in tools {
                    let by_digest = versions.entry(name.as_str()).or_default();
                    by_digest
                        .entry(digest.as_str())
                        .or_default()
                        .push(node.as_str());
                }
            }
            for by_digest in versions.values().filter(|v| v.len() > 1) {
                disagreeing.extend(by_digest.values().flatten().map(|n| n.to_string()));
            }
        }
        PinState {
            server_id: spec.id.clone(),
            mode: PinMode::of(&spec.pin).name().to_string(),
            pinned: record.pins.as_ref().map_or(0, |p| p.tools.len() as u32),
            drifted: drifted.into_iter().collect(),
            disagreeing_nodes: disagreeing.into_iter().collect(),
            rejected: rejected.into_iter().collect(),
        }
    }

    /// `sms pins diff`: see [`render_diff`].
    pub fn diff(&self, record: &ServerRecord, tool: Option<&str>) -> Result<String, PinError> {
        let server = record.spec.as_ref().map(|s| s.id.as_str()).unwrap_or("");
        let book = self.inner.lock();
        let nodes = book
            .seen
            .get(server)
            .ok_or_else(|| PinError::NothingSeen(server.to_string()))?;
        Ok(render_diff(record, nodes, &book.definitions, tool))
    }
}

/// The digest `record` pins for `tool`.
fn pinned<'a>(record: &'a ServerRecord, tool: &str) -> Option<&'a str> {
    record
        .pins
        .as_ref()
        .and_then(|p| p.tools.get(tool))
        .map(String::as_str)
}

/// "node-a: 1a2b3c4d5e6f, node-b: 9f8e7d6c5b4a" for one tool.
fn describe_nodes(nodes: &BTreeMap<String, BTreeMap<String, String>>, tool: &str) -> String {
    nodes
        .iter()
        .filter_map(|(node, tools)| {
            tools
                .get(tool)
                .map(|d| format!("{node}: {}", d.get(..12).unwrap_or(d)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use spear_proto::v1::ServerSpec;

    use super::*;

    fn seen(description: &str) -> SeenTool {
        let definition = json!({"name": "echo", "description": description});
        SeenTool {
            name: "echo".into(),
            digest: digest(&definition),
            definition: definition.to_string(),
            redacted: false,
        }
    }

    fn record(pins: Option<ToolPins>) -> ServerRecord {
        ServerRecord {
            spec: Some(ServerSpec {
                id: "s".into(),
                ..Default::default()
            }),
            pins,
            ..Default::default()
        }
    }

    #[test]
    fn a_definition_that_does_not_hash_to_its_digest_is_refused_and_nothing_recorded() {
        let book = PinBook::default();
        let mut lying = seen("Echo");
        lying.definition = json!({"name": "echo", "description": "Something else"}).to_string();
        assert!(matches!(
            book.observe("n1", "s", &[lying]),
            Err(PinError::WrongDigest { .. })
        ));
        assert_eq!(
            book.approval(&record(None), None, None),
            Err(PinError::NothingSeen("s".into()))
        );
    }

    #[test]
    fn nodes_that_disagree_need_a_node_named_to_approve() {
        let book = PinBook::default();
        let (old, new) = (seen("Echo"), seen("Echo, and leak"));
        let pinned = record(Some(PinBook::first_pins(std::slice::from_ref(&old))));
        book.observe("n1", "s", std::slice::from_ref(&new)).unwrap();
        book.observe("n2", "s", std::slice::from_ref(&old)).unwrap();
        let state = book.state(&pinned);
        assert_eq!(state.drifted, vec!["echo".to_string()]);
        assert_eq!(
            state.disagreeing_nodes,
            vec!["n1".to_string(), "n2".to_string()]
        );
        assert!(matches!(
            book.approval(&pinned, None, None),
            Err(PinError::Disagree { .. })
        ));
        let approved = book.approval(&pinned, Some("echo"), Some("n1")).unwrap();
        assert_eq!(approved.tools.get("echo"), Some(&new.digest));
        let diff = book.diff(&pinned, None).unwrap();
        assert!(diff.contains("changed on n1"), "{diff}");
        assert!(
            diff.contains("+  \"description\": \"Echo, and leak\""),
            "{diff}"
        );
        assert_eq!(book.reject(&pinned, None), 1);
        assert_eq!(book.state(&pinned).rejected, vec!["echo".to_string()]);
        assert!(book.state(&pinned).drifted.is_empty());
    }
}
