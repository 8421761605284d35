//! What one server lists, sorted for the model ([`Catalog::sort`]): the
//! tools offered (with the name and description the model sees), the ones
//! held back because they are not as pinned, and the ones quarantined for
//! an unusable schema. When a server is listed is `listing.rs`.

use std::sync::Arc;

use rmcp::model::Tool;
use spear_proto::pins::PinMode;
use spear_proto::v1::{SeenTool, ToolPins};
use tracing::warn;

use super::names::offered_name;
use super::pins::{self, Held};
use crate::mcp::check_input_schema;
use crate::tool_index::Terms;

/// A server's usable tools, as listed once, with what is offered to a model
/// for each computed once too.
#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: Vec<Tool>,
    /// For `tools[i]`: what the model sees of it.
    pub offered: Vec<Offer>,
    pub quarantined: Vec<Quarantined>,
    /// Listed tools not offered because they are not as pinned.
    pub held: std::collections::BTreeMap<String, Held>,
    /// The pins this catalog was sorted by.
    pub(super) pins: Option<ToolPins>,
}

impl Catalog {
    /// Sorts the tools a server listed (`seen` is each one's name and
    /// digest, in the same order): offered, held back by `pins` under
    /// `mode`, or quarantined for an unusable schema or a second listing.
    /// What the model sees of each offered tool is computed here, once.
    pub fn sort(
        server_id: &str,
        tools: Vec<Tool>,
        seen: Vec<SeenTool>,
        pins: Option<ToolPins>,
        mode: PinMode,
    ) -> Catalog {
        let mut catalog = Catalog {
            pins: pins.clone(),
            ..Catalog::default()
        };
        for (tool, seen) in tools.into_iter().zip(seen) {
            if let Err(held) = pins::verdict(mode, pins.as_ref(), &seen.name, &seen.digest) {
                warn!(server_id = %server_id, tool = %seen.name, "{}", held.sentence(server_id, &seen.name));
                catalog.held.insert(seen.name, held);
                continue;
            }
            if catalog
                .tools
                .last()
                .is_some_and(|t: &Tool| t.name == tool.name)
            {
                catalog.quarantined.push(Quarantined {
                    tool: tool.name.to_string(),
                    why: "the server lists it twice; the first is used".into(),
                });
                continue;
            }
            match check_input_schema(&tool.input_schema) {
                Ok(()) => {
                    let name = offered_name(server_id, &tool.name);
                    let description = format!(
                        "[MCP server '{}', tool '{}'] {}",
                        server_id,
                        tool.name,
                        tool.description.as_deref().unwrap_or("")
                    );
                    let definition_bytes = name.len()
                        + description.len()
                        + serde_json::to_string(&tool.input_schema).map_or(0, |s| s.len());
                    catalog.offered.push(Offer {
                        terms: Arc::new(Terms::of_tool(server_id, &tool)),
                        name,
                        description,
                        definition_bytes,
                    });
                    catalog.tools.push(tool);
                }
                Err(why) => {
                    warn!(server_id = %server_id, tool = %tool.name, %why, "tool quarantined: its schema is unusable");
                    catalog.quarantined.push(Quarantined {
                        tool: tool.name.to_string(),
                        why: why.to_string(),
                    });
                }
            }
        }
        catalog
    }

    /// `tool`'s pinned digest, when the server's tools are pinned.
    pub fn pin_digest(&self, tool: &str) -> Option<&str> {
        self.pins.as_ref()?.tools.get(tool).map(String::as_str)
    }

    /// The digest of `tool`'s definition as listed now: its pin when it
    /// has one (an offered tool is as pinned), else computed.
    pub fn definition_digest(&self, tool: &str) -> Option<String> {
        if let Some(pinned) = self.pin_digest(tool) {
            return Some(pinned.to_string());
        }
        let listed = self.tools.iter().find(|t| t.name == tool)?;
        Some(super::pins::seen(listed).digest)
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The offered name (docs/mcp-on-nodes.md, "Tool names").
    pub name: String,
    pub description: String,
    /// Its words, for tool search: computed here, once per listing.
    pub terms: Arc<Terms>,
    /// Bytes of its definition as sent to a model (name, description,
    /// schema): what `mcp.tool_search` `auto` weighs.
    pub definition_bytes: usize,
}

/// A tool left out because its schema is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub tool: String,
    pub why: String,
}
