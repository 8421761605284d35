//! A server that acts per principal (its grant is `token_exchange`, or its
//! people log in themselves: `"per_principal": true`) holds a
//! session per person besides its own: a person's calls go over theirs,
//! whose token is theirs (SMS exchanges their delegated token for it),
//! so neither a token nor a session is ever shared between people. The
//! server's own session (the node's workload identity) lists its tools and
//! serves runs no person invoked.
//!
//! Sessions idle for [`IDLE`] are closed when the next person's call
//! comes, at most [`MAX_SESSIONS`] are held (the least recently used goes
//! first); all close with the slot.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_proto::v1::OauthGrant;
use tracing::info;

use super::catalog::Catalog;
use super::slot::{close_client, Slot};
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
    catalog: Option<(Arc<Catalog>, Option<tokio::time::Instant>)>,
}

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
            close_client(person.client).await;
        }
    }
}

impl Slot {
    /// Whether calls for a person go over a session of their own.
    pub(super) fn acts_per_principal(&self) -> bool {
        self.spec.auth.as_ref().is_some_and(|auth| {
            auth.grant == OauthGrant::TokenExchange as i32
                || (auth.grant == OauthGrant::AuthorizationCode as i32 && auth.per_principal)
        })
    }

    /// `on_behalf`'s session, connected if they have none, its token
    /// source handed their current run's delegation.
    pub(super) async fn person(&self, on_behalf: &OnBehalf) -> Result<Arc<McpClient>, McpError> {
        let mut sessions = self.people.sessions.lock().await;
        let now = Instant::now();
        let idle: Vec<String> = sessions
            .iter()
            .filter(|(who, p)| *who != &on_behalf.principal && now - p.used > IDLE)
            .map(|(who, _)| who.clone())
            .collect();
        for who in idle {
            if let Some(gone) = sessions.remove(&who) {
                self.runtime.spawn(close_client(gone.client));
            }
        }
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&on_behalf.principal) {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, p)| p.used)
                .map(|(who, _)| who.clone());
            if let Some(gone) = oldest.and_then(|who| sessions.remove(&who)) {
                self.runtime.spawn(close_client(gone.client));
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
        let client = self.connect_as(&delegation).await?;
        info!(server_id = %self.spec.id, principal = %on_behalf.principal, "a person's MCP session connected");
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

    /// The tools as `on_behalf`'s own session lists them (kept until the
    /// server's TTL or the re-list bound): a server whose people log in
    /// themselves may have no credential but theirs.
    pub(super) async fn person_catalog(
        &self,
        on_behalf: &OnBehalf,
    ) -> Result<Arc<Catalog>, McpError> {
        let client = self.person(on_behalf).await?;
        let kept = {
            let sessions = self.people.sessions.lock().await;
            sessions
                .get(&on_behalf.principal)
                .and_then(|p| p.catalog.clone())
        };
        if let Some((catalog, stale_at)) = kept {
            if stale_at.is_none_or(|at| tokio::time::Instant::now() < at) {
                return Ok(catalog);
            }
        }
        let (catalog, stale_at) = self.list(&client).await?;
        *self.people.last_listed.lock() = Some(Arc::clone(&catalog));
        if let Some(person) = self
            .people
            .sessions
            .lock()
            .await
            .get_mut(&on_behalf.principal)
        {
            if Arc::ptr_eq(&person.client, &client) {
                person.catalog = Some((Arc::clone(&catalog), stale_at));
            }
        }
        Ok(catalog)
    }

    /// Whether only people hold credentials for the server (they log in
    /// themselves): its tools are listed over a person's session.
    fn only_people_list(&self) -> bool {
        self.spec.auth.as_ref().is_some_and(|auth| {
            auth.grant == OauthGrant::AuthorizationCode as i32 && auth.per_principal
        })
    }

    /// The catalog a run sees: on a server only people hold credentials
    /// for, as their own session lists it; otherwise the server's (a token
    /// exchange server lists as the node itself).
    pub async fn catalog_for(
        &self,
        on_behalf: Option<&OnBehalf>,
    ) -> Result<Arc<Catalog>, McpError> {
        match on_behalf {
            Some(person) if self.only_people_list() => {
                if person.delegation.is_empty() {
                    return Err(McpError::NoDelegation(self.spec.id.clone()));
                }
                match self.person_catalog(person).await {
                    Ok(catalog) => Ok(catalog),
                    Err(error) => self.people.last_listed.lock().clone().ok_or(error),
                }
            }
            _ => self.catalog().await,
        }
    }

    /// A new session whose tokens are those `delegation` gets from SMS.
    async fn connect_as(&self, delegation: &Delegation) -> Result<Arc<McpClient>, McpError> {
        let credentials = self
            .options
            .credentials
            .as_ref()
            .ok_or(McpError::NoCredentials(
                "this process has no source of OAuth tokens (a node gets them from SMS)",
            ))?;
        let mut options = self.options.clone();
        options.tokens = Some(credentials.tokens_for(&self.spec.id, Arc::clone(delegation)));
        let lookup = Arc::clone(&self.lookup);
        let spec = self.spec.clone();
        let connect = self.runtime.spawn(async move {
            McpClient::connect(&spec, &move |name| lookup(name), options).await
        });
        let connected = connect.await.unwrap_or_else(|e| {
            Err(McpError::Initialize(format!(
                "the connecting task failed: {e}"
            )))
        });
        connected.map(Arc::new).map_err(|error| self.clean(error))
    }
}
