//! What one server lists, sorted for the model: the tools offered (with
//! the name and description the model sees), the ones held back because
//! they are not as pinned, and the ones quarantined for an unusable
//! schema. Listed on first use and again after `tools/list_changed`, the
//! server's list TTL or the re-list bound (`timeouts_ms.relist`, 60 s),
//! a reconnect or a pin change ([`Slot::catalog`]).

use std::sync::Arc;

use rmcp::model::Tool;
use spear_proto::v1::{SeenTool, ToolPins};
use tracing::warn;

use super::names::offered_name;
use super::pins::{self, Held};
use super::slot::{ServerState, Slot};
use crate::mcp::{check_input_schema, McpClient, McpError};
use crate::tool_index::Terms;

/// `tools/list` pages read at most per refresh.
const PAGE_CAP: usize = 100;

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
    pins: Option<ToolPins>,
}

impl Catalog {
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
    /// The offered name (DESIGN §3.4).
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

impl Slot {
    /// The server's tools, listed on first use and again after
    /// `tools/list_changed` or a reconnect.
    pub async fn catalog(&self) -> Result<Arc<Catalog>, McpError> {
        let client = self.connected().await?;
        if let Some(catalog) = self.still_fresh().await {
            return Ok(catalog);
        }
        let (catalog, stale_at) = self.list(&client).await?;
        if let Some(current) = self.live.lock().await.as_mut() {
            if Arc::ptr_eq(&current.client, &client) {
                current.catalog = Some(Arc::clone(&catalog));
                current.stale_at = stale_at;
            }
        }
        Ok(catalog)
    }

    /// The tools `client` lists, checked and sorted as offered, and when
    /// to list them again.
    pub(super) async fn list(
        &self,
        client: &McpClient,
    ) -> Result<(Arc<Catalog>, Option<tokio::time::Instant>), McpError> {
        let listed = match client.list_tools(PAGE_CAP, self.timeouts.list_tools).await {
            Ok(tools) => tools,
            Err(error) => {
                if matches!(error, McpError::Closed) {
                    self.failed(error.to_string());
                }
                return Err(self.clean(error));
            }
        };
        // Listed again after the server's own TTL or the re-list bound,
        // whichever is first: a change never announced is still seen.
        let fresh_for = listed
            .fresh_for
            .map_or(self.timeouts.relist, |ttl| ttl.min(self.timeouts.relist));
        let stale_at = Some(tokio::time::Instant::now() + fresh_for);
        let seen: Vec<SeenTool> = listed.tools.iter().map(pins::seen).collect();
        let pins = self
            .pinning
            .report(
                &self.spec,
                &self.secrets,
                &seen,
                self.pinning.current(&self.spec.id),
            )
            .await;
        let mode = self.pin_mode();
        let mut catalog = Catalog {
            pins: pins.clone(),
            ..Catalog::default()
        };
        for (tool, seen) in listed.tools.into_iter().zip(seen) {
            if let Err(held) = pins::verdict(mode, pins.as_ref(), &seen.name, &seen.digest) {
                warn!(server_id = %self.spec.id, tool = %seen.name, "{}", held.sentence(&self.spec.id, &seen.name));
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
                    let name = offered_name(&self.spec.id, &tool.name);
                    let description = format!(
                        "[MCP server '{}', tool '{}'] {}",
                        self.spec.id,
                        tool.name,
                        tool.description.as_deref().unwrap_or("")
                    );
                    let definition_bytes = name.len()
                        + description.len()
                        + serde_json::to_string(&tool.input_schema).map_or(0, |s| s.len());
                    catalog.offered.push(Offer {
                        terms: Arc::new(Terms::of_tool(&self.spec.id, &tool)),
                        name,
                        description,
                        definition_bytes,
                    });
                    catalog.tools.push(tool);
                }
                Err(why) => {
                    warn!(server_id = %self.spec.id, tool = %tool.name, %why, "tool quarantined: its schema is unusable");
                    catalog.quarantined.push(Quarantined {
                        tool: tool.name.to_string(),
                        why: why.to_string(),
                    });
                }
            }
        }
        let catalog = Arc::new(catalog);
        self.show(&catalog);
        Ok((catalog, stale_at))
    }

    /// The catalog listed last, unless it must be listed again: the server
    /// said its tools changed, the list is past its TTL or the re-list
    /// bound, or a pin changed (an approval; the tools are sorted by the
    /// new pins).
    async fn still_fresh(&self) -> Option<Arc<Catalog>> {
        let mut live = self.live.lock().await;
        let current = live.as_mut()?;
        let changed = current.tools_changed.has_changed().unwrap_or(false);
        let stale = current
            .stale_at
            .is_some_and(|at| tokio::time::Instant::now() >= at);
        let repinned = current
            .catalog
            .as_ref()
            .is_some_and(|c| self.pinning.moved(&self.spec.id, c.pins.as_ref()));
        if let (Some(catalog), false, false, false) = (&current.catalog, changed, stale, repinned) {
            return Some(Arc::clone(catalog));
        }
        current.tools_changed.borrow_and_update();
        None
    }

    /// Shows `catalog` in the server's status (tools, quarantined, held),
    /// and records what it newly holds or offers again.
    fn show(&self, catalog: &Catalog) {
        let mut status = self.status.lock();
        status.tools = catalog.tools.len();
        status.quarantined = catalog.quarantined.clone();
        let before = std::mem::replace(
            &mut status.held,
            catalog
                .held
                .iter()
                .map(|(tool, held)| (tool.clone(), held.sentence(&self.spec.id, tool)))
                .collect(),
        );
        self.pinning
            .audit_changes(&self.spec.id, &before, &catalog.held, &catalog.tools);
        let partial = !catalog.quarantined.is_empty() || !catalog.held.is_empty();
        if status.state == ServerState::Ready && partial {
            status.state = ServerState::Degraded;
        }
    }
}
