//! `spear.v1.Invocation`: the node's invocation API over the [`Invoker`].
//! With TLS only SMS and admins may call it ([`Access::runner`]); an
//! `authorization` header is never looked at here.

use std::sync::Arc;

use spear_identity::{
    incoming, server, Access, AdminToken, Caller, DenyList, JoinToken, TlsIdentity,
};
use spear_proto::v1::invocation_server::Invocation;
use spear_proto::v1::invocation_server::InvocationServer;
use spear_proto::v1::Principal;
use spear_proto::v1::{ExplainRequest, ExplainResponse, InvokeRequest, InvokeResponse};
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tracing::warn;

use super::{InvokeError, Invoker};

pub struct InvocationService {
    invoker: Arc<Invoker>,
    access: Access,
}

impl InvocationService {
    /// `secure`: the port is TLS, so callers must be SMS or an admin
    /// whose certificate `revoked` does not list; on plaintext, callers
    /// present `join` when it is set.
    pub fn new(invoker: Arc<Invoker>, secure: bool, join: JoinToken, revoked: DenyList) -> Self {
        Self {
            invoker,
            access: Access::new(secure, AdminToken::none())
                .with_join_token(join)
                .with_deny_list(revoked),
        }
    }
}

/// Codes chosen so SMS can tell "try another node" (unavailable, resource
/// exhausted) from "this task cannot run anywhere" (everything else).
fn to_status(error: InvokeError) -> Status {
    let message = error.to_string();
    match error {
        InvokeError::InvalidRequest(_) | InvokeError::InvalidTask(_) => {
            Status::invalid_argument(message)
        }
        InvokeError::TaskNotFound(_) => Status::not_found(message),
        InvokeError::TaskUnavailable { .. } => Status::unavailable(message),
        InvokeError::Busy(_) => Status::resource_exhausted(message),
        // Nothing ran here: SMS tries another node.
        InvokeError::Draining | InvokeError::Unrecorded(_) => Status::unavailable(message),
        InvokeError::Module(_)
        | InvokeError::Load(_)
        | InvokeError::Backend(_)
        | InvokeError::Reference(_)
        | InvokeError::Refused { .. }
        | InvokeError::CompileTimeout(_) => Status::failed_precondition(message),
    }
}

#[tonic::async_trait]
impl Invocation for InvocationService {
    async fn explain(
        &self,
        request: Request<ExplainRequest>,
    ) -> Result<Response<ExplainResponse>, Status> {
        self.access.runner(&request)?;
        self.invoker
            .explain(request.into_inner())
            .await
            .map(Response::new)
            .map_err(to_status)
    }

    async fn invoke(
        &self,
        request: Request<InvokeRequest>,
    ) -> Result<Response<InvokeResponse>, Status> {
        let caller = self.access.runner(&request)?;
        // SMS's trace context: the run joins the invocation's trace.
        let traceparent = request
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut request = request.into_inner();
        tracing::debug!(%caller, task_id = %request.task_id, "invocation accepted");
        spear_proto::check_input_len(request.input.len())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let principal = principal_of(&caller, request.principal.take());
        self.invoker
            .invoke(
                request,
                traceparent.as_deref(),
                &caller.to_string(),
                principal,
            )
            .await
            .map(Response::new)
            .map_err(to_status)
    }
}

/// Who a run is for: the principal SMS verified, when SMS is the caller
/// (its certificate, this node's own token, or an open loopback port);
/// anyone else (an admin calling the node directly) is the principal
/// itself, whatever its request says.
fn principal_of(caller: &Caller, sent: Option<Principal>) -> Principal {
    match (caller, sent) {
        (Caller::Sms | Caller::Joined | Caller::Anonymous, Some(principal)) => principal,
        (caller, _) => Principal::admin(&caller.to_string()),
    }
}

/// Serves `spear.v1.Invocation` (and gRPC health) until shutdown.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<TlsIdentity>,
    service: InvocationService,
    mut shutdown: watch::Receiver<bool>,
) {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<InvocationServer<InvocationService>>()
        .await;
    let access = service.access.clone();
    let service = InvocationServer::new(service)
        .max_decoding_message_size(spear_proto::defaults::MAX_INVOKE_REQUEST_BYTES)
        .max_encoding_message_size(spear_proto::defaults::MAX_INVOKE_RESPONSE_BYTES);
    let gate = access.gate().with_deadlines(spear_identity::Deadlines::new(
        std::time::Duration::from_secs(30),
        &[(
            "/spear.v1.Invocation/Invoke",
            spear_proto::defaults::RUN_ANSWER_WITHIN,
        )],
    ));
    let result = server()
        .layer(gate)
        .add_service(health_service)
        .add_service(service)
        .serve_with_incoming_shutdown(incoming(listener, tls), async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await;
    if let Err(error) = result {
        warn!(%error, "the invocation service stopped");
    }
}
