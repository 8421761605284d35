//! The per-person sessions one server holds (see `acting.rs` for when a
//! server has them): kept by principal, closed when idle for [`IDLE`] at
//! the next person's call, at most [`MAX_SESSIONS`] held (the least
//! recently used goes first); all close with the slot. This file keeps
//! them; it does not know how one is connected.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use super::catalog::Catalog;
use crate::mcp::{Delegation, McpClient, McpError, OnBehalf};

/// How long a person's session outlives their last call.
const IDLE: Duration = Duration::from_secs(600);
/// The most people's sessions one server holds on a node; beyond it the
/// least recently used is closed (its person reconnects on their next call).
const MAX_SESSIONS: usize = 256;

/// One person's session.
struct Person {
    client: Arc<McpClient>,
    delegation: Delegation,
    used: Instant,
    /// The tools it listed, until when.
    catalog: Option<Listed>,
}

/// A catalog and when it must be listed again.
pub(super) type Listed = (Arc<Catalog>, Option<tokio::time::Instant>);

/// The per-person sessions of one server.
#[derive(Default)]
pub(super) struct People {
    sessions: tokio::sync::Mutex<HashMap<String, Person>>,
    /// The tools as the last person's session listed them: offered to a
    /// person who cannot list (not connected yet), whose call then gets
    /// the sentence that says why instead of no tool at all.
    last_listed: parking_lot::Mutex<Option<Arc<Catalog>>>,
}

impl People {
    pub(super) async fn close(&self) {
        let sessions: Vec<Person> = self.sessions.lock().await.drain().map(|(_, p)| p).collect();
        for person in sessions {
            person.client.close().await;
        }
    }

    /// `on_behalf`'s session, handed their current run's delegation; made
    /// with `connect` when they have none open. Idle sessions and, beyond
    /// the cap, the least recently used are closed on `runtime` first.
    pub(super) async fn session<F>(
        &self,
        on_behalf: &OnBehalf,
        runtime: &Handle,
        connect: impl FnOnce(Delegation) -> F,
    ) -> Result<Arc<McpClient>, McpError>
    where
        F: Future<Output = Result<Arc<McpClient>, McpError>>,
    {
        let mut sessions = self.sessions.lock().await;
        let now = Instant::now();
        let idle: Vec<String> = sessions
            .iter()
            .filter(|(who, p)| *who != &on_behalf.principal && now - p.used > IDLE)
            .map(|(who, _)| who.clone())
            .collect();
        for who in idle {
            if let Some(gone) = sessions.remove(&who) {
                runtime.spawn(gone.client.close());
            }
        }
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&on_behalf.principal) {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, p)| p.used)
                .map(|(who, _)| who.clone());
            if let Some(gone) = oldest.and_then(|who| sessions.remove(&who)) {
                runtime.spawn(gone.client.close());
            }
        }
        if let Some(person) = sessions.get_mut(&on_behalf.principal) {
            if !person.client.is_closed() {
                *person.delegation.lock() = on_behalf.delegation.clone();
                person.used = now;
                return Ok(Arc::clone(&person.client));
            }
        }
        let delegation: Delegation =
            Arc::new(parking_lot::Mutex::new(on_behalf.delegation.clone()));
        let client = connect(Arc::clone(&delegation)).await?;
        sessions.insert(
            on_behalf.principal.clone(),
            Person {
                client: Arc::clone(&client),
                delegation,
                used: now,
                catalog: None,
            },
        );
        Ok(client)
    }

    /// What `principal`'s session listed last, if it is still fresh.
    pub(super) async fn fresh_catalog(&self, principal: &str) -> Option<Arc<Catalog>> {
        let sessions = self.sessions.lock().await;
        let (catalog, stale_at) = sessions.get(principal)?.catalog.clone()?;
        stale_at
            .is_none_or(|at| tokio::time::Instant::now() < at)
            .then_some(catalog)
    }

    /// Keeps what `principal`'s session `client` listed (unless the session
    /// was replaced meanwhile), and keeps it as the last listed by anyone.
    pub(super) async fn listed(&self, principal: &str, client: &Arc<McpClient>, listed: Listed) {
        *self.last_listed.lock() = Some(Arc::clone(&listed.0));
        if let Some(person) = self.sessions.lock().await.get_mut(principal) {
            if Arc::ptr_eq(&person.client, client) {
                person.catalog = Some(listed);
            }
        }
    }

    /// The tools the last person's session listed.
    pub(super) fn last_listed(&self) -> Option<Arc<Catalog>> {
        self.last_listed.lock().clone()
    }
}
