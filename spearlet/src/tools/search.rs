//! Tool search in a send (`mcp.tool_search`, docs/decisions/0006-tool-search.md): entry point
//! [`Search::begin`].
//!
//! When a session would show the model many tools, a send offers one tool
//! of the node's, [`SEARCH_TOOL`], instead of every definition. The model
//! searches in its own words; the node ranks the session's tools with
//! [`crate::tool_index`] and answers with the best few, which are offered
//! with their full definitions from the next request on (and for the rest
//! of the session). So:
//!
//! - a search only ever sees the tools the session's policy offers (the
//!   index is built from that [`ToolSet`] and nothing else);
//! - a tool the model did not obtain is not in the set its calls resolve
//!   against, so calling it is refused like any unknown name;
//! - a search is a tool call: the run's tool-call budget and the send's
//!   `max_total_tool_calls` count it, and the reply's trace shows it.
//!
//! On a backend that searches natively (`tool_search = "native"`), the
//! provider searches instead and the loop obtains what it found with
//! [`Search::load`]; the index is then unused, the rest holds the same.

use std::sync::Arc;

use serde_json::json;
use spear_guest::reply::{FoundTool, SearchTrace};

use super::ToolSet;
use crate::llm::ToolSpec;
use crate::tool_index::SearchIndex;
use crate::tool_policy::ToolSearch;

pub use spear_guest::params::SEARCH_TOOL;

/// `auto` searches when a send would offer more than this many MCP tools…
pub const AUTO_TOOLS: usize = 30;
/// …or when their definitions would weigh more than this many bytes
/// (about 8,000 tokens).
pub const AUTO_BYTES: usize = 32 * 1024;

/// Results of one search unless the model asks for fewer or more.
const DEFAULT_LIMIT: usize = 5;
/// Results of one search at most.
const MAX_LIMIT: usize = 10;
/// Tools a session keeps obtained at most when the node searches (each
/// one's definition is in every request); past this the oldest are let go
/// (the model can find them again). A provider that searches keeps what
/// it found loaded itself, so then the session keeps them all.
pub const MAX_LOADED: usize = 64;
/// Bytes of a description shown in a search result (the full one comes
/// with the tool's definition).
const SHOWN_DESCRIPTION: usize = 200;

/// Whether a send under `mode` that would offer `set` searches instead.
pub fn searches(mode: ToolSearch, set: &ToolSet) -> bool {
    match mode {
        ToolSearch::Off => false,
        ToolSearch::On => !set.tools.is_empty(),
        ToolSearch::Auto => {
            set.tools.len() > AUTO_TOOLS
                || set.tools.iter().map(|t| t.definition_bytes).sum::<usize>() > AUTO_BYTES
        }
    }
}

/// A session's search: every tool its policy offers (indexed) and the
/// ones the model obtained, in the order it got them.
#[derive(Debug, Clone)]
pub struct Search {
    all: ToolSet,
    index: Arc<SearchIndex>,
    loaded: Vec<String>,
    /// Obtained tools kept at most.
    keep: usize,
}

/// What one search call gives back.
#[derive(Debug, Clone)]
pub struct Searched {
    /// The answer shown to the model.
    pub text: String,
    pub is_error: bool,
    /// For the reply's trace (absent when the arguments were unusable).
    pub trace: Option<SearchTrace>,
}

impl Search {
    /// The search of a send offering `all`, continuing the session's
    /// `previous` one: what it obtained stays obtained (while the policy
    /// still offers it), and its index is used again when the tools are
    /// the same.
    /// `keep` is how many obtained tools it keeps ([`MAX_LOADED`] when
    /// the node searches).
    pub fn begin(all: ToolSet, previous: Option<&Search>, keep: usize) -> Search {
        let docs: Vec<_> = all.tools.iter().map(|t| Arc::clone(&t.terms)).collect();
        let index = match previous {
            Some(previous) if previous.index.built_from(&docs) => Arc::clone(&previous.index),
            _ => Arc::new(SearchIndex::build(&docs)),
        };
        let mut search = Search {
            all,
            index,
            loaded: Vec::new(),
            keep: keep.max(1),
        };
        for name in previous.map(|p| p.loaded.as_slice()).unwrap_or_default() {
            search.load(name);
        }
        search
    }

    /// Obtains the tool offered as `name`, if the session may see it.
    pub fn load(&mut self, name: &str) -> bool {
        if self.all.offered.resolve(name).is_err() {
            return false;
        }
        if !self.loaded.iter().any(|n| n == name) {
            if self.loaded.len() >= self.keep {
                self.loaded.remove(0);
            }
            self.loaded.push(name.to_string());
        }
        true
    }

    /// Every tool the session's policy offers (the one the index holds).
    pub fn all(&self) -> &ToolSet {
        &self.all
    }

    /// The tools the model may call now: the ones it obtained (and the
    /// held ones, whose calls say why they are held).
    pub fn visible(&self) -> ToolSet {
        let mut set = ToolSet {
            held: self.all.held.clone(),
            ..ToolSet::default()
        };
        // In the order obtained: each request's list grows at its end,
        // so what was sent before stays a prefix (prompt caches).
        for name in &self.loaded {
            if let Some(tool) = self.all.tools.iter().find(|t| &t.name == name) {
                set.offered
                    .offer_named(tool.name.clone(), &tool.server_id, &tool.tool);
                set.tools.push(tool.clone());
            }
        }
        set
    }

    /// The search tool's definition. Its description says how many tools
    /// there are and on which servers, so the model knows to search.
    pub fn spec(&self) -> ToolSpec {
        let mut servers: Vec<&str> = Vec::new();
        for tool in &self.all.tools {
            if !servers.contains(&tool.server_id.as_str()) {
                servers.push(&tool.server_id);
            }
        }
        let shown = servers.len().min(20);
        let more = if servers.len() > shown {
            format!(" and {} more", servers.len() - shown)
        } else {
            String::new()
        };
        ToolSpec {
            name: SEARCH_TOOL.into(),
            description: format!(
                "Search the {} tools of this session (MCP servers: {}{more}) by what you need \
                 to do, in a few words. The best matches are returned, and from your next \
                 step on you can call them by the names given. Search again with other \
                 words when none fits.",
                self.all.tools.len(),
                servers[..shown].join(", "),
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do, in a few words"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "How many tools to return (default 5)"}
                },
                "required": ["query"]
            }),
            deferred: false,
        }
    }

    /// Runs one search call with `arguments` as the model wrote them, and
    /// obtains the tools it finds.
    pub fn run(&mut self, arguments: &str) -> Searched {
        let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
        let Some(query) = args.get("query").and_then(|q| q.as_str()) else {
            return Searched {
                text: format!("{SEARCH_TOOL} takes {{\"query\": \"what the tool should do\"}}"),
                is_error: true,
                trace: None,
            };
        };
        let limit = args
            .get("limit")
            .and_then(|l| l.as_u64())
            .map_or(DEFAULT_LIMIT, |l| (l as usize).clamp(1, MAX_LIMIT));
        let hits = self.index.search(query, limit);
        let mut shown = Vec::with_capacity(hits.len());
        let mut found = Vec::with_capacity(hits.len());
        for hit in hits {
            let Some(tool) = self.all.tools.get(hit.doc) else {
                continue;
            };
            shown.push(json!({
                "name": tool.name,
                "server": tool.server_id,
                "tool": tool.tool,
                "description": spear_common::text::prefix(&tool.description, SHOWN_DESCRIPTION),
            }));
            found.push(FoundTool {
                name: tool.name.clone(),
                server: tool.server_id.clone(),
                tool: tool.tool.clone(),
            });
        }
        for tool in &found {
            self.load(&tool.name);
        }
        let note = if found.is_empty() {
            "No tool matched; search again with other words."
        } else {
            "These tools can be called from your next step on."
        };
        Searched {
            text: json!({"tools": shown, "note": note}).to_string(),
            is_error: false,
            trace: Some(SearchTrace {
                query: spear_common::text::prefix(query, 256).to_string(),
                found,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_index::Terms;
    use crate::tools::OfferedTool;

    /// `n` tools of server `s`, named `t0`, `t1`, …
    fn tools(n: usize) -> ToolSet {
        let mut set = ToolSet::default();
        for i in 0..n {
            let tool = format!("t{i}");
            let name = set.offered.offer("s", &tool);
            set.tools.push(OfferedTool {
                name,
                description: format!("tool number {i}"),
                input_schema: Arc::new(Default::default()),
                server_id: "s".into(),
                tool: tool.clone(),
                terms: Arc::new(Terms::of_fields(&[(3.0, &tool)])),
                definition_bytes: 10,
            });
        }
        set
    }

    #[test]
    fn the_node_keeps_the_last_64_found_and_a_provider_all() {
        let all = tools(70);
        let names: Vec<String> = all.tools.iter().map(|t| t.name.clone()).collect();
        let mut node = Search::begin(all.clone(), None, MAX_LOADED);
        let mut native = Search::begin(all, None, usize::MAX);
        for name in &names {
            assert!(node.load(name) && native.load(name));
        }
        let kept: Vec<String> = node.visible().tools.into_iter().map(|t| t.name).collect();
        assert_eq!(kept, names[6..], "the oldest six let go, the order kept");
        assert_eq!(native.visible().tools.len(), 70);
        // What the session obtained carries over to its next send.
        let next = Search::begin(tools(70), Some(&node), MAX_LOADED);
        assert_eq!(next.visible().tools.len(), 64);
        // A name the session may not see is never obtained.
        assert!(!node.load("mcp__cw__eA"));
    }

    #[test]
    fn auto_searches_past_30_tools_or_32_kib() {
        assert!(!searches(ToolSearch::Auto, &tools(30)));
        assert!(searches(ToolSearch::Auto, &tools(31)));
        let mut heavy = tools(2);
        heavy.tools[0].definition_bytes = AUTO_BYTES;
        assert!(searches(ToolSearch::Auto, &heavy));
        assert!(searches(ToolSearch::On, &tools(1)) && !searches(ToolSearch::On, &tools(0)));
        assert!(!searches(ToolSearch::Off, &tools(100)));
    }
}
