//! The console's only way to SMS's state: SMS's own gRPC services, called
//! in process. A view shows what the matching CLI command reads, through
//! the same code, so the two always agree (docs/console.md), and every write
//! goes through the same checks and lands in SMS's audit chain.
//!
//! Calls are made as `admin/console`: the console has already checked
//! the signed-in role ([`super::session::Role`]) before it calls a write.

use std::sync::Arc;

use spear_identity::{Identity, Peer};
use spear_proto::shared_registry::registry_server::Registry;
use spear_proto::v1::approvals_server::Approvals;
use spear_proto::v1::audit_server::Audit;
use spear_proto::v1::credentials_server::Credentials;
use spear_proto::v1::pins_server::Pins;
use spear_proto::v1::status_server::Status as StatusApi;
use spear_proto::v1::tasks_server::Tasks;
use spear_proto::v1::*;
use tonic::{Request, Status};

use crate::events::TrustEvents;
use crate::grpc::{
    ApprovalsService, AuditService, CredentialsService, PinsService, RegistryService,
    StatusService, TasksService,
};

/// SMS's services as the console calls them.
#[derive(Clone)]
pub struct Api {
    pub registry: Arc<RegistryService>,
    pub status: Arc<StatusService>,
    pub tasks: Arc<TasksService>,
    pub pins: Arc<PinsService>,
    pub approvals: Arc<ApprovalsService>,
    pub audit: Arc<AuditService>,
    pub credentials: Arc<CredentialsService>,
    /// Approvals, drift and audit records as they happen (the live views).
    pub events: TrustEvents,
    /// Where a login starts from (a server's URL and client, as SMS
    /// resolves them); the credential it yields goes through
    /// [`Api::put_credential`].
    pub broker: Arc<crate::oauth::Broker>,
}

/// The identity console calls carry, and SMS's audit chain names.
pub const CONSOLE_ADMIN: &str = "console";

/// `message` as a call from the console.
fn call<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.extensions_mut().insert(Peer {
        addr: None,
        tls: false,
        identity: Some(Identity::Admin(CONSOLE_ADMIN.to_string())),
        serial: None,
    });
    request
}

/// A refused call, as the one sentence the service gave.
pub type Refused = Status;

impl Api {
    pub async fn status(&self, node_id: Option<&str>) -> Result<StatusResponse, Refused> {
        let request = StatusRequest {
            node_id: node_id.unwrap_or_default().to_string(),
        };
        Ok(self.status.get_status(call(request)).await?.into_inner())
    }

    pub async fn servers(&self) -> Result<ListServersResponse, Refused> {
        Ok(self
            .registry
            .list_servers(call(ListServersRequest {}))
            .await?
            .into_inner())
    }

    pub async fn pins(&self) -> Result<Vec<PinState>, Refused> {
        Ok(self
            .pins
            .list_pins(call(ListPinsRequest {}))
            .await?
            .into_inner()
            .servers)
    }

    pub async fn pin_diff(&self, server_id: &str, tool: &str) -> Result<String, Refused> {
        let request = DiffPinsRequest {
            server_id: server_id.to_string(),
            tool: tool.to_string(),
        };
        Ok(self.pins.diff_pins(call(request)).await?.into_inner().text)
    }

    pub async fn approve_pins(
        &self,
        server_id: &str,
        tool: &str,
        node_id: &str,
    ) -> Result<ApprovePinsResponse, Refused> {
        let request = ApprovePinsRequest {
            server_id: server_id.to_string(),
            tool: tool.to_string(),
            node_id: node_id.to_string(),
        };
        Ok(self.pins.approve_pins(call(request)).await?.into_inner())
    }

    pub async fn tasks(&self) -> Result<Vec<TaskSpec>, Refused> {
        Ok(self
            .tasks
            .list_tasks(call(ListTasksRequest {}))
            .await?
            .into_inner()
            .tasks)
    }

    pub async fn task(&self, id: &str) -> Result<TaskSpec, Refused> {
        let request = GetTaskRequest { id: id.to_string() };
        Ok(self.tasks.get_task(call(request)).await?.into_inner())
    }

    pub async fn register_task(&self, task: TaskSpec) -> Result<(), Refused> {
        let request = RegisterTaskRequest { task: Some(task) };
        self.tasks.register_task(call(request)).await?;
        Ok(())
    }

    pub async fn delete_task(&self, id: &str) -> Result<(), Refused> {
        let request = DeleteTaskRequest { id: id.to_string() };
        self.tasks.delete_task(call(request)).await?;
        Ok(())
    }

    pub async fn invoke(&self, request: InvokeRequest) -> Result<InvokeResponse, Refused> {
        Ok(self.tasks.invoke_task(call(request)).await?.into_inner())
    }

    /// [`Api::invoke`] for the person whose ID `token` it is: SMS verifies
    /// it and checks the task's "invokers" as for any person's call.
    pub async fn invoke_as(
        &self,
        request: InvokeRequest,
        token: &str,
    ) -> Result<InvokeResponse, Refused> {
        let mut request = call(request);
        let value = token
            .parse()
            .map_err(|_| Status::invalid_argument("the principal token is not ASCII text"))?;
        request
            .metadata_mut()
            .insert(spear_identity::PRINCIPAL_TOKEN_HEADER, value);
        Ok(self.tasks.invoke_task(request).await?.into_inner())
    }

    pub async fn explain(&self, request: ExplainRequest) -> Result<ExplainResponse, Refused> {
        Ok(self.tasks.explain_task(call(request)).await?.into_inner())
    }

    pub async fn approvals(&self) -> Result<Vec<ApprovalInfo>, Refused> {
        Ok(self
            .approvals
            .list_approvals(call(ListApprovalsRequest {}))
            .await?
            .into_inner()
            .approvals)
    }

    /// One approval, with the call's arguments while it is pending.
    pub async fn approval(&self, approval_id: &str) -> Result<ApprovalInfo, Refused> {
        let request = ShowApprovalRequest {
            approval_id: approval_id.to_string(),
        };
        Ok(self
            .approvals
            .show_approval(call(request))
            .await?
            .into_inner())
    }

    pub async fn decide(
        &self,
        approval_id: &str,
        approve: bool,
        reason: &str,
    ) -> Result<ApprovalInfo, Refused> {
        let request = DecideApprovalRequest {
            approval_id: approval_id.to_string(),
            approve,
            reason: reason.to_string(),
        };
        let decided = self.approvals.decide_approval(call(request)).await?;
        Ok(decided.into_inner().approval.unwrap_or_default())
    }

    pub async fn audit(&self, query: QueryAuditRequest) -> Result<QueryAuditResponse, Refused> {
        Ok(self.audit.query_audit(call(query)).await?.into_inner())
    }

    /// `sms usage`'s totals, with a window's totals each for a chart.
    pub async fn usage(
        &self,
        request: spear_proto::v1::UsageRequest,
    ) -> Result<spear_proto::v1::UsageResponse, Refused> {
        Ok(self.audit.usage(call(request)).await?.into_inner())
    }

    pub async fn verify_audit(&self) -> Result<Vec<ChainReport>, Refused> {
        Ok(self
            .audit
            .verify_audit(call(VerifyAuditRequest {}))
            .await?
            .into_inner()
            .chains)
    }

    pub async fn put_credential(
        &self,
        server_id: &str,
        credentials_json: String,
    ) -> Result<CredentialStatus, Refused> {
        let request = PutCredentialRequest {
            server_id: server_id.to_string(),
            credentials_json,
        };
        let put = self.credentials.put_credential(call(request)).await?;
        Ok(put.into_inner().status.unwrap_or_default())
    }

    pub async fn credentials(&self) -> Result<Vec<CredentialStatus>, Refused> {
        Ok(self
            .credentials
            .list_credentials(call(ListCredentialsRequest {}))
            .await?
            .into_inner()
            .credentials)
    }
}
