//! One supervised MCP connection per server per node, shared by every
//! session, created on first use and closed when the server leaves the
//! registry or changes.
//!
//! Each server has a `slot.rs`: its connection (if any), its tool catalog, a
//! semaphore for `max_concurrency`, its visible state and a backoff that
//! gates reconnection after a failure. A dead server fails calls at once and
//! is reconnected on the next use once its backoff allows. `names.rs` gives
//! each listed tool the name a model sees for it.

mod acting;
mod catalog;
mod listing;
pub(crate) mod names;
mod people;
pub mod pins;
mod relay;
mod slot;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use rmcp::model::JsonObject;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

pub use catalog::{Catalog, Offer, Quarantined};
pub use pins::{Held, ReportFailed, Reporter};
pub use slot::{ServerState, ServerStatus};

use crate::mcp::{McpError, OnBehalf, RenderedResult, SessionOptions};
use crate::registry::{RegistryChange, RegistryHandle};
use crate::trust::audit::AuditLog;
use pins::Pinning;
use slot::Slot;

/// Reads a variable of the node's environment for `${NAME}` references in
/// server files, as the node policy allows.
pub type Lookup =
    Arc<dyn Fn(&str) -> Result<Option<String>, crate::node_policy::Refused> + Send + Sync>;

/// The node's MCP connections.
#[derive(Clone)]
pub struct Connections {
    inner: Arc<Inner>,
}

struct Inner {
    registry: RegistryHandle,
    /// The registry watcher that closes changed servers' connections; it
    /// holds only a weak reference, and is stopped with the last handle.
    watcher: Mutex<Option<JoinHandle<()>>>,
    lookup: Lookup,
    options: SessionOptions,
    /// Tells SMS what each server lists (a running node only).
    reporter: Option<Reporter>,
    /// Where pin decisions are recorded (a running node only).
    audit: Option<AuditLog>,
    /// The runtime connections are made on: the node's own, even when the
    /// first use comes from a guest thread (see `wasm::threads`).
    runtime: tokio::runtime::Handle,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Connections {
    /// Starts watching the registry: a change to a server closes exactly
    /// that server's connection and drops its catalog. The watcher is the
    /// component's own: it stops at [`Connections::shutdown`] or when the
    /// last handle is dropped.
    pub fn new(registry: RegistryHandle, lookup: Lookup) -> Connections {
        Self::with_options(registry, lookup, SessionOptions::default())
    }

    /// As [`Connections::new`], every session held with `options` (what
    /// `spearlet mcp` chooses on its command line).
    pub fn with_options(
        registry: RegistryHandle,
        lookup: Lookup,
        options: SessionOptions,
    ) -> Connections {
        Self::reporting(registry, lookup, options, None, None)
    }

    /// As [`Connections::with_options`], reporting what each server lists
    /// to SMS with `reporter` and recording pin decisions in `audit` (a
    /// running node).
    pub fn reporting(
        registry: RegistryHandle,
        lookup: Lookup,
        options: SessionOptions,
        reporter: Option<Reporter>,
        audit: Option<AuditLog>,
    ) -> Connections {
        let changes = registry.subscribe();
        let inner = Arc::new(Inner {
            registry,
            watcher: Mutex::default(),
            lookup,
            options,
            reporter,
            audit,
            runtime: tokio::runtime::Handle::current(),
            slots: Mutex::default(),
        });
        let watcher = tokio::spawn(invalidate_on_change(Arc::downgrade(&inner), changes));
        *inner.watcher.lock() = Some(watcher);
        Connections { inner }
    }

    /// The slot of `server_id`, made from the current registry entry.
    fn slot(&self, server_id: &str) -> Result<Arc<Slot>, McpError> {
        if let Some(slot) = self.inner.slots.lock().get(server_id) {
            return Ok(Arc::clone(slot));
        }
        let view = self.inner.registry.current();
        let record = view
            .servers
            .get(server_id)
            .ok_or_else(|| McpError::UnknownServer(server_id.to_string()))?;
        let spec = record
            .spec
            .clone()
            .ok_or_else(|| McpError::UnknownServer(server_id.to_string()))?;
        let mut slots = self.inner.slots.lock();
        let slot = slots.entry(server_id.to_string()).or_insert_with(|| {
            Arc::new(Slot::new(
                spec,
                Arc::clone(&self.inner.lookup),
                self.inner.options.clone(),
                self.inner.runtime.clone(),
                Pinning {
                    registry: self.inner.registry.clone(),
                    reporter: self.inner.reporter.clone(),
                    audit: self.inner.audit.clone(),
                    last_report: Arc::default(),
                },
            ))
        });
        Ok(Arc::clone(slot))
    }

    /// The server's usable tools (connecting on first use).
    /// [`Connections::catalog`] as a run's person sees it: on a server
    /// that acts per principal, listed over their own session.
    pub async fn catalog_for(
        &self,
        server_id: &str,
        on_behalf: Option<&OnBehalf>,
    ) -> Result<Arc<Catalog>, McpError> {
        self.slot(server_id)?.catalog_for(on_behalf).await
    }

    pub async fn catalog(&self, server_id: &str) -> Result<Arc<Catalog>, McpError> {
        self.slot(server_id)?.catalog().await
    }

    /// A result of `server_id` as a model may read it: without the values
    /// its env and header references resolved to.
    pub fn redact_result(&self, server_id: &str, text: String) -> String {
        match self.slot(server_id) {
            Ok(slot) => slot.redact_result(text),
            Err(_) => text,
        }
    }

    /// `text` with the values of `server_id`'s secrets replaced, for what
    /// leaves the node (an approval's arguments).
    pub fn redact(&self, server_id: &str, text: &str) -> String {
        match self.slot(server_id) {
            Ok(slot) => slot.redact(text),
            // No slot, no resolved secrets: nothing of them can be in it.
            Err(_) => text.to_string(),
        }
    }

    /// Calls `tool`, within the server's concurrency limit and timeout, and
    /// renders the result within its output limit.
    pub async fn call(
        &self,
        server_id: &str,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<RenderedResult, McpError> {
        self.slot(server_id)?.call(tool, arguments, None).await
    }

    /// [`Connections::call`] for a run's person: on a server that acts per
    /// principal, over their own session with their own token.
    pub async fn call_for(
        &self,
        server_id: &str,
        tool: &str,
        arguments: Option<JsonObject>,
        on_behalf: Option<&OnBehalf>,
    ) -> Result<RenderedResult, McpError> {
        self.slot(server_id)?.call(tool, arguments, on_behalf).await
    }

    /// State of every server this node has used.
    pub fn status(&self) -> BTreeMap<String, ServerStatus> {
        let slots: Vec<Arc<Slot>> = self.inner.slots.lock().values().cloned().collect();
        slots
            .iter()
            .map(|s| (s.id().to_string(), s.status()))
            .collect()
    }

    /// Stops the registry watcher and closes every connection.
    pub async fn shutdown(&self) {
        if let Some(watcher) = self.inner.watcher.lock().take() {
            watcher.abort();
        }
        let slots: Vec<Arc<Slot>> = self.inner.slots.lock().drain().map(|(_, s)| s).collect();
        for slot in slots {
            slot.close().await;
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.get_mut().take() {
            watcher.abort();
        }
    }
}

/// Closes the connection of every server a registry change touched, for as
/// long as the connections exist.
async fn invalidate_on_change(inner: Weak<Inner>, mut changes: watch::Receiver<RegistryChange>) {
    while changes.changed().await.is_ok() {
        let change = changes.borrow_and_update().clone();
        let Some(inner) = inner.upgrade() else { return };
        // A record whose spec is the same (only its pins moved, say)
        // keeps its connection: the slot reads pins from the registry.
        let view = &change.view;
        let stale: Vec<Arc<Slot>> = {
            let mut slots = inner.slots.lock();
            let respecified: Vec<&String> = change
                .affected
                .iter()
                .filter(|id| {
                    let now = view.servers.get(*id).and_then(|r| r.spec.as_ref());
                    slots.get(*id).is_some_and(|slot| now != Some(slot.spec()))
                })
                .collect();
            respecified
                .into_iter()
                .filter_map(|id| slots.remove(id))
                .collect()
        };
        drop(inner);
        for slot in stale {
            info!(server_id = %slot.id(), "server changed in the registry; closing its connection");
            slot.close().await;
        }
    }
}
