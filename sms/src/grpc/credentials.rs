use std::sync::Arc;

use spear_identity::{Access, Caller};
use spear_proto::v1::credentials_server::Credentials as CredentialsApi;
use spear_proto::v1::{
    AccessTokenRequest, AccessTokenResponse, DeleteCredentialRequest, DeleteCredentialResponse,
    ListCredentialsRequest, ListCredentialsResponse, OpenSealedRequest, OpenSealedResponse,
    PutCredentialRequest, PutCredentialResponse, ServerSpec,
};
use tonic::{Request, Response, Status};
use tracing::info;

use crate::audit::AdminAudit;
use crate::oauth::{Broker, BrokerError, PerPrincipalError, VaultError};
use crate::sealed::{OpenError, Sealer};

/// `spear.v1.Credentials`: admins put and inspect the cluster's OAuth
/// credentials; nodes get access tokens from them, and the sealed values
/// of the servers they run.
pub struct CredentialsService {
    broker: Arc<Broker>,
    sealer: Sealer,
    access: Access,
    audit: AdminAudit,
}

impl CredentialsService {
    pub fn new(broker: Arc<Broker>, sealer: Sealer, access: Access) -> Self {
        Self {
            broker,
            sealer,
            access,
            audit: AdminAudit::default(),
        }
    }

    /// Records this service's admin writes in the audit trail.
    pub fn audited(mut self, audit: AdminAudit) -> Self {
        self.audit = audit;
        self
    }

    /// The registered server `id` when `caller` is a node it is for (a
    /// caller without an identity, on plaintext, cannot be told apart).
    fn for_caller(&self, caller: &Caller, id: &str, what: &str) -> Result<ServerSpec, Status> {
        let spec = self
            .broker
            .spec(id)
            .ok_or_else(|| Status::not_found(format!("server '{id}' is not in the registry")))?;
        if let Caller::Node(node_id) = caller {
            if !spear_proto::scope::in_scope(&spec, node_id) {
                return Err(Status::permission_denied(format!(
                    "server '{id}' is not for node '{node_id}' (its \"nodes\" do not name it); {what}"
                )));
            }
        }
        Ok(spec)
    }
}

/// A login's JSON is a few kilobytes; anything much larger is not one.
const MAX_CREDENTIAL_BYTES: usize = 64 * 1024;

fn to_status(error: BrokerError) -> Status {
    let message = error.to_string();
    match error {
        BrokerError::UnknownServer(_) => Status::not_found(message),
        BrokerError::NotProtected(_)
        | BrokerError::NoLoginNeeded { .. }
        | BrokerError::BadLogin { .. } => Status::invalid_argument(message),
        BrokerError::NoKey
        | BrokerError::NotLoggedIn(_)
        | BrokerError::NeedsLogin { .. }
        | BrokerError::WrongKey { .. }
        | BrokerError::Config { .. }
        | BrokerError::Vault(VaultError::Corrupt { .. }) => Status::failed_precondition(message),
        BrokerError::Renew { .. } | BrokerError::Vault(_) => Status::unavailable(message),
        BrokerError::PerRun(_) | BrokerError::PerPerson(_) | BrokerError::NotPerPerson(_) => {
            Status::failed_precondition(message)
        }
        BrokerError::PerPrincipal(error) => match error {
            PerPrincipalError::Delegation(_) => Status::permission_denied(message),
            PerPrincipalError::Unreachable { .. } => Status::unavailable(message),
            PerPrincipalError::NoKey
            | PerPrincipalError::NotConnected { .. }
            | PerPrincipalError::NotLoggedIn { .. }
            | PerPrincipalError::NoPerson(_)
            | PerPrincipalError::NoWorkloadIssuer(_)
            | PerPrincipalError::NoWorkload { .. } => Status::failed_precondition(message),
        },
    }
}

#[tonic::async_trait]
impl CredentialsApi for CredentialsService {
    async fn put_credential(
        &self,
        request: Request<PutCredentialRequest>,
    ) -> Result<Response<PutCredentialResponse>, Status> {
        let caller = self.access.admin(&request, "put_credential")?;
        let request = request.into_inner();
        if request.credentials_json.len() > MAX_CREDENTIAL_BYTES {
            return Err(Status::invalid_argument(format!(
                "the credential is {} bytes; the limit is {MAX_CREDENTIAL_BYTES}",
                request.credentials_json.len()
            )));
        }
        let result = self
            .broker
            .put(
                &request.server_id,
                &request.credentials_json,
                &caller.to_string(),
            )
            .await
            .map_err(to_status);
        self.audit
            .record(&caller, "put_credential", &request.server_id, &result)
            .await;
        let status = result?;
        Ok(Response::new(PutCredentialResponse {
            status: Some(status),
        }))
    }

    async fn delete_credential(
        &self,
        request: Request<DeleteCredentialRequest>,
    ) -> Result<Response<DeleteCredentialResponse>, Status> {
        let caller = self.access.admin(&request, "delete_credential")?;
        let id = request.into_inner().server_id;
        let result = self.broker.forget(&id).await.map_err(to_status);
        self.audit
            .record(&caller, "delete_credential", &id, &result)
            .await;
        let existed = result?;
        info!(server_id = %id, existed, %caller, "OAuth credential deleted");
        Ok(Response::new(DeleteCredentialResponse { existed }))
    }

    async fn list_credentials(
        &self,
        request: Request<ListCredentialsRequest>,
    ) -> Result<Response<ListCredentialsResponse>, Status> {
        self.access.admin(&request, "list_credentials")?;
        let credentials = self.broker.statuses().await.map_err(to_status)?;
        Ok(Response::new(ListCredentialsResponse {
            credentials,
            has_key: self.broker.key_id().is_some(),
            key_id: self.broker.key_id().unwrap_or_default().to_string(),
        }))
    }

    async fn get_access_token(
        &self,
        request: Request<AccessTokenRequest>,
    ) -> Result<Response<AccessTokenResponse>, Status> {
        let caller = self.access.any_node(&request, "get_access_token")?;
        let request = request.into_inner();
        // A token only for a node the server is for (its "nodes").
        self.for_caller(&caller, &request.server_id, "no token is given")?;
        let refused = Some(request.refused_sha256.as_str()).filter(|s| !s.is_empty());
        let issued = if self.broker.is_per_principal(&request.server_id) {
            // Per run: the node must be one SMS can name, since the token
            // is its run's person's, or its own.
            let Caller::Node(node_id) = &caller else {
                return Err(Status::permission_denied(format!(
                    "server '{}' acts per principal: its tokens go only to a node SMS can identify (mutual TLS, or the node's own token)",
                    request.server_id
                )));
            };
            self.broker
                .delegated_token(&request.server_id, node_id, &request.delegation, refused)
                .await
        } else {
            self.broker.access_token(&request.server_id, refused).await
        }
        .map_err(to_status)?;
        Ok(Response::new(AccessTokenResponse {
            access_token: issued.access_token,
            expires_at_ms: issued.expires_at.map_or(0, crate::oauth::millis),
        }))
    }

    async fn open_sealed(
        &self,
        request: Request<OpenSealedRequest>,
    ) -> Result<Response<OpenSealedResponse>, Status> {
        let caller = self.access.any_node(&request, "open_sealed")?;
        let request = request.into_inner();
        let spec = self.for_caller(
            &caller,
            &request.server_id,
            "its sealed values are not opened",
        )?;
        let values = self
            .sealer
            .open(&spec, &request.values)
            .map_err(|e| match e {
                OpenError::NotCurrent { .. } => Status::failed_precondition(e.to_string()),
                OpenError::WrongKey(_) => Status::internal(e.to_string()),
            })?;
        info!(server = %request.server_id, %caller, values = values.len(), "opened sealed values for a node");
        Ok(Response::new(OpenSealedResponse { values }))
    }
}
