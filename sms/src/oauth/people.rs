//! The broker's side of servers that act per principal: a node's request
//! for its run's token ([`Broker::delegated_token`]) and a person's own
//! login ([`Broker::put_for_person`]). Two kinds of server:
//!
//! - `"grant": "token_exchange"`: the person's token is exchanged, the
//!   node as actor ([`super::per_principal`]);
//! - `"grant": "authorization_code"` with `"per_principal": true`: each
//!   person logs in (connects their account) themselves; SMS keeps and
//!   renews one credential per (person, server) and hands a run only its
//!   person's.

use spear_proto::v1::{CredentialStatus, OauthGrant};

use super::broker::{grant_of, Holder};
use super::per_principal::{PerPrincipalError, Server};
use super::state::{status_of, status_without_record};
use super::{Broker, BrokerError, Issued};

impl Broker {
    /// A token of per-principal server `id` for node `node_id`'s run: its
    /// person's when `delegation` is the run's; without one, the node's
    /// own (token exchange) or none (people's own logins).
    pub async fn delegated_token(
        &self,
        id: &str,
        node_id: &str,
        delegation: &[u8],
        refused: Option<&str>,
    ) -> Result<Issued, BrokerError> {
        let server = self.protected(id)?;
        let per_principal = self.per_principal().ok_or(BrokerError::NoKey)?;
        if grant_of(&server.auth) == OauthGrant::AuthorizationCode {
            let person = per_principal
                .open(delegation, node_id)?
                .ok_or_else(|| PerPrincipalError::NoPerson(id.to_string()))?;
            let holder = Holder::person(id, &person.principal);
            return self
                .token_at(&holder, &server, refused)
                .await
                .map_err(|error| not_logged_in(error, &person.principal, id));
        }
        let (url, client) = self.client(id, &server)?;
        let server = Server {
            id,
            url: &url,
            client: &client,
            subject_token_type: &server.auth.subject_token_type,
        };
        Ok(per_principal
            .token(server, node_id, delegation, refused)
            .await?)
    }

    /// Stores what `principal`'s own login to server `id` obtained: theirs
    /// alone, handed only to their runs.
    pub async fn put_for_person(
        &self,
        id: &str,
        principal: &str,
        credentials_json: &str,
    ) -> Result<CredentialStatus, BrokerError> {
        let server = self.protected(id)?;
        if !logs_in_per_person(&server.auth) {
            return Err(BrokerError::NotPerPerson(id.to_string()));
        }
        let holder = Holder::person(id, principal);
        self.put_at(&holder, &server, credentials_json, principal)
            .await
    }
}

impl Broker {
    /// The state of `principal`'s own login to each server whose people
    /// log in themselves (never a value).
    pub async fn person_statuses(
        &self,
        principal: &str,
    ) -> Result<Vec<CredentialStatus>, BrokerError> {
        let servers: Vec<String> = self.hub.with_servers(|_, _, servers| {
            servers
                .iter()
                .filter_map(|r| r.spec.as_ref())
                .filter(|s| s.auth.as_ref().is_some_and(logs_in_per_person))
                .map(|s| s.id.clone())
                .collect()
        });
        let key_id = self.key_id().unwrap_or_default().to_string();
        let now = std::time::SystemTime::now();
        let mut out = Vec::new();
        for id in servers {
            let holder = Holder::person(&id, principal);
            let status = match self.vault.get(&holder.record).await? {
                Some(record) => CredentialStatus {
                    server_id: id,
                    ..status_of(&record, true, &key_id, now)
                },
                None => status_without_record(&id, OauthGrant::AuthorizationCode),
            };
            out.push(status);
        }
        Ok(out)
    }
}

/// Whether people log in to the server themselves.
fn logs_in_per_person(auth: &spear_proto::v1::OAuth) -> bool {
    auth.per_principal && grant_of(auth) == OauthGrant::AuthorizationCode
}

/// A person's missing or lapsed login, as their sentence.
fn not_logged_in(error: BrokerError, principal: &str, server: &str) -> BrokerError {
    match error {
        BrokerError::NotLoggedIn(_) => PerPrincipalError::NotLoggedIn {
            principal: principal.to_string(),
            server: server.to_string(),
            why: "they never connected their account".into(),
        }
        .into(),
        BrokerError::NeedsLogin { why, .. } => PerPrincipalError::NotLoggedIn {
            principal: principal.to_string(),
            server: server.to_string(),
            why,
        }
        .into(),
        other => other,
    }
}
