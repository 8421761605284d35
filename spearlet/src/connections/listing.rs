//! Listing one server's tools: on first use and again after
//! `tools/list_changed`, the server's list TTL or the re-list bound
//! (`timeouts_ms.relist`, 60 s), a reconnect or a pin change
//! ([`Slot::catalog`]); what was listed is sorted by [`Catalog::sort`] and
//! shown in the server's status. A list past the server's bound
//! (`limits.max_tools`, `crate::mcp` list_bound) fails the server with its
//! sentence, and its session is closed: it is listed again only when the
//! restart backoff lets it connect again.

use std::sync::Arc;

use spear_proto::v1::SeenTool;

use super::catalog::Catalog;
use super::pins;
use super::slot::{ServerState, Slot};
use crate::mcp::{McpClient, McpError};

/// `tools/list` pages read at most per refresh.
const PAGE_CAP: usize = 100;

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
                match &error {
                    McpError::Closed => self.failed(error.to_string()),
                    McpError::ListRefused(why) => self.refused_list(client, why).await,
                    _ => {}
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
        let catalog = Catalog::sort(&self.spec.id, listed.tools, seen, pins, mode);
        let catalog = Arc::new(catalog);
        self.show(&catalog);
        Ok((catalog, stale_at))
    }

    /// Marks the server failed for listing too much, and closes `client`'s
    /// session if it is the shared one.
    async fn refused_list(&self, client: &McpClient, why: &str) {
        self.failed(why.to_string());
        let mut live = self.live.lock().await;
        if live
            .as_ref()
            .is_some_and(|l| std::ptr::eq(Arc::as_ptr(&l.client), client))
        {
            if let Some(refused) = live.take() {
                self.runtime.spawn(refused.client.close());
            }
        }
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
