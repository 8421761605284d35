//! `spear.v1.Invocation`: the node's invocation API over the [`Invoker`].

use std::sync::Arc;

use spear_proto::auth::AdminToken;
use spear_proto::v1::invocation_server::Invocation;
use spear_proto::v1::{InvokeRequest, InvokeResponse};
use tonic::{Request, Response, Status};

use super::{InvokeError, Invoker};

/// Largest guest input accepted.
const MAX_INPUT_BYTES: usize = 16 * 1024 * 1024;

pub struct InvocationService {
    invoker: Arc<Invoker>,
    token: AdminToken,
}

impl InvocationService {
    /// With a token, every call must carry it (SMS sends its admin token).
    pub fn new(invoker: Arc<Invoker>, token: AdminToken) -> Self {
        Self { invoker, token }
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
        InvokeError::Module(_) | InvokeError::Load(_) | InvokeError::Backend(_) => {
            Status::failed_precondition(message)
        }
    }
}

#[tonic::async_trait]
impl Invocation for InvocationService {
    async fn invoke(
        &self,
        request: Request<InvokeRequest>,
    ) -> Result<Response<InvokeResponse>, Status> {
        self.token.check(&request)?;
        let request = request.into_inner();
        if request.input.len() > MAX_INPUT_BYTES {
            return Err(Status::invalid_argument(format!(
                "the input is {} bytes; the limit is {MAX_INPUT_BYTES}",
                request.input.len()
            )));
        }
        self.invoker
            .invoke(request)
            .await
            .map(Response::new)
            .map_err(to_status)
    }
}
