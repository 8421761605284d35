//! A server that acts per principal (its grant is `token_exchange`, or its
//! people log in themselves: `"per_principal": true`) holds a session per
//! person besides its own (`people.rs` keeps them): a person's calls go
//! over theirs, whose token is theirs (SMS exchanges their delegated token
//! for it), so neither a token nor a session is ever shared between
//! people. The server's own session (the node's workload identity) lists
//! its tools and serves runs no person invoked.

use std::sync::Arc;

use spear_proto::v1::OauthGrant;
use tracing::info;

use super::catalog::Catalog;
use super::slot::Slot;
use crate::mcp::{Delegation, McpClient, McpError, OnBehalf};

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
        let connect = |delegation: Delegation| async move {
            let client = self.connect_as(&delegation).await?;
            info!(server_id = %self.spec.id, principal = %on_behalf.principal, "a person's MCP session connected");
            Ok(client)
        };
        self.people.session(on_behalf, &self.runtime, connect).await
    }

    /// The tools as `on_behalf`'s own session lists them (kept until the
    /// server's TTL or the re-list bound): a server whose people log in
    /// themselves may have no credential but theirs.
    async fn person_catalog(&self, on_behalf: &OnBehalf) -> Result<Arc<Catalog>, McpError> {
        let client = self.person(on_behalf).await?;
        if let Some(catalog) = self.people.fresh_catalog(&on_behalf.principal).await {
            return Ok(catalog);
        }
        let (catalog, stale_at) = self.list(&client).await?;
        let listed = (Arc::clone(&catalog), stale_at);
        self.people
            .listed(&on_behalf.principal, &client, listed)
            .await;
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
                    Err(error) => self.people.last_listed().ok_or(error),
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
        self.connect_with(options)
            .await
            .map(Arc::new)
            .map_err(|error| self.clean(error))
    }
}
