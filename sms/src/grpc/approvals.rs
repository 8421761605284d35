//! `spear.v1.Approvals`: nodes ask, wait and claim; admins list, show and
//! decide. A thin face over [`crate::approvals::ApprovalBook`].

use std::sync::Arc;
use std::time::Duration;

use spear_identity::Access;
use spear_proto::v1::approvals_server::Approvals;
use spear_proto::v1::trust_event::Event;
use spear_proto::v1::{
    ApprovalBinding, ApprovalInfo, AwaitApprovalRequest, AwaitApprovalResponse,
    ClaimApprovalRequest, ClaimApprovalResponse, DecideApprovalRequest, DecideApprovalResponse,
    ListApprovalsRequest, ListApprovalsResponse, RequestApprovalRequest, RequestApprovalResponse,
    ShowApprovalRequest,
};
use tonic::{Request, Response, Status};
use tracing::info;

use crate::approvals::{ApprovalBook, ApprovalError};
use crate::audit::AdminAudit;
use crate::events::TrustEvents;

pub struct ApprovalsService {
    book: Arc<ApprovalBook>,
    events: TrustEvents,
    access: Access,
    audit: AdminAudit,
    /// Only nodes alive here may ask (`None`: anyone who may call).
    nodes: Option<Arc<crate::nodes::NodeTable>>,
    /// With replicas: nodes alive at another replica may ask too (a node
    /// back at a restarted replica before its first heartbeat there).
    shared: Option<Arc<crate::nodes::SharedNodes>>,
}

impl ApprovalsService {
    pub fn new(book: Arc<ApprovalBook>, events: TrustEvents, access: Access) -> Self {
        Self {
            book,
            events,
            access,
            audit: AdminAudit::default(),
            nodes: None,
            shared: None,
        }
    }

    /// Takes approval requests only from nodes that heartbeat to this SMS
    /// (no approvals for made-up or departed node ids).
    pub fn for_live_nodes(
        mut self,
        nodes: Arc<crate::nodes::NodeTable>,
        shared: Option<Arc<crate::nodes::SharedNodes>>,
    ) -> Self {
        self.nodes = Some(nodes);
        self.shared = shared;
        self
    }

    /// Whether `node_id` heartbeats here, or (with replicas) to another.
    async fn alive(&self, node_id: &str) -> bool {
        let Some(nodes) = &self.nodes else {
            return true;
        };
        if nodes.is_alive(node_id) {
            return true;
        }
        match &self.shared {
            Some(shared) => shared
                .invocable()
                .await
                .is_ok_and(|all| all.iter().any(|n| n.node_id == node_id)),
            None => false,
        }
    }

    /// Records this service's admin writes in the audit trail.
    pub fn audited(mut self, audit: AdminAudit) -> Self {
        self.audit = audit;
        self
    }
}

/// The node a binding names: the caller must be that node.
fn bound_node(binding: Option<&ApprovalBinding>) -> String {
    binding.map(|b| b.node_id.clone()).unwrap_or_default()
}

fn to_status(error: ApprovalError) -> Status {
    match &error {
        ApprovalError::Unknown(_) => Status::not_found(error.to_string()),
        ApprovalError::OtherNode { .. } => Status::permission_denied(error.to_string()),
        ApprovalError::TooManyForNode(_)
        | ApprovalError::TooManyForTask(_)
        | ApprovalError::TooMany => Status::resource_exhausted(error.to_string()),
        ApprovalError::NotPending { .. } | ApprovalError::OtherCall { .. } => {
            Status::failed_precondition(error.to_string())
        }
        ApprovalError::Missing(_)
        | ApprovalError::LargeArguments(_)
        | ApprovalError::ShownNotBound => Status::invalid_argument(error.to_string()),
        ApprovalError::Unavailable(_) => Status::unavailable(error.to_string()),
        ApprovalError::Contended(_) => Status::aborted(error.to_string()),
    }
}

#[tonic::async_trait]
impl Approvals for ApprovalsService {
    async fn request_approval(
        &self,
        request: Request<RequestApprovalRequest>,
    ) -> Result<Response<RequestApprovalResponse>, Status> {
        let node_id = bound_node(request.get_ref().binding.as_ref());
        self.access.node(&request, &node_id, "request_approval")?;
        if !self.alive(&node_id).await {
            return Err(Status::failed_precondition(format!(
                "node '{node_id}' has not heartbeated to SMS within {:?}; only live nodes ask approvals (the node asks again once it has)",
                crate::nodes::NODE_TTL
            )));
        }
        let ask = request.into_inner();
        let binding = ask.binding.unwrap_or_default();
        let (server_id, tool, task_id) = (
            binding.server_id.clone(),
            binding.tool.clone(),
            binding.task_id.clone(),
        );
        let info = self
            .book
            .request(
                binding,
                ask.arguments,
                Duration::from_millis(ask.expires_in_ms),
            )
            .await
            .map_err(to_status)?;
        info!(approval_id = %info.approval_id, %node_id, %task_id, %server_id, %tool, "a call waits for approval; `sms approvals list` shows it");
        self.events.publish(Event::Approval(info.clone()));
        Ok(Response::new(RequestApprovalResponse {
            approval_id: info.approval_id,
            expires_at_ms: info.expires_at_ms,
        }))
    }

    async fn await_approval(
        &self,
        request: Request<AwaitApprovalRequest>,
    ) -> Result<Response<AwaitApprovalResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "await_approval")?;
        let ask = request.into_inner();
        let decision = self
            .book
            .wait(
                &node_id,
                &ask.approval_id,
                Duration::from_millis(ask.wait_ms),
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(AwaitApprovalResponse {
            state: decision.state as i32,
            reason: decision.reason,
            decided_by: decision.decided_by,
        }))
    }

    async fn claim_approval(
        &self,
        request: Request<ClaimApprovalRequest>,
    ) -> Result<Response<ClaimApprovalResponse>, Status> {
        let node_id = bound_node(request.get_ref().binding.as_ref());
        self.access.node(&request, &node_id, "claim_approval")?;
        let ask = request.into_inner();
        let binding = ask.binding.unwrap_or_default();
        self.book
            .claim(&ask.approval_id, &binding)
            .await
            .map_err(to_status)?;
        info!(approval_id = %ask.approval_id, %node_id, "approval used for its call");
        if let Ok(info) = self.book.show(&ask.approval_id) {
            self.events.publish(Event::Approval(info));
        }
        Ok(Response::new(ClaimApprovalResponse {}))
    }

    async fn list_approvals(
        &self,
        request: Request<ListApprovalsRequest>,
    ) -> Result<Response<ListApprovalsResponse>, Status> {
        self.access.admin(&request, "list_approvals")?;
        Ok(Response::new(ListApprovalsResponse {
            approvals: self.book.list(),
        }))
    }

    async fn show_approval(
        &self,
        request: Request<ShowApprovalRequest>,
    ) -> Result<Response<ApprovalInfo>, Status> {
        self.access.admin(&request, "show_approval")?;
        let id = request.into_inner().approval_id;
        self.book.show(&id).map(Response::new).map_err(to_status)
    }

    async fn decide_approval(
        &self,
        request: Request<DecideApprovalRequest>,
    ) -> Result<Response<DecideApprovalResponse>, Status> {
        let caller = self.access.admin(&request, "decide_approval")?;
        let ask = request.into_inner();
        let result = self
            .book
            .decide(
                &ask.approval_id,
                ask.approve,
                &ask.reason,
                &caller.to_string(),
            )
            .await
            .map_err(to_status);
        let action = if ask.approve { "approve" } else { "deny" };
        self.audit
            .record(&caller, action, &ask.approval_id, &result)
            .await;
        let info = result?;
        info!(approval_id = %ask.approval_id, approve = ask.approve, %caller, "approval decided");
        self.events.publish(Event::Approval(info.clone()));
        Ok(Response::new(DecideApprovalResponse {
            approval: Some(info),
        }))
    }
}
