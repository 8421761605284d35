use std::sync::Arc;

use spear_proto::v1::tasks_server::Tasks as TasksApi;
use spear_proto::v1::{
    DeleteTaskRequest, DeleteTaskResponse, ExplainRequest, ExplainResponse, GetTaskRequest,
    InvokeRequest, InvokeResponse, ListTasksRequest, ListTasksResponse, RegisterTaskRequest,
    RegisterTaskResponse, TaskSpec,
};
use tonic::{Request, Response, Status};
use tracing::info;
use tracing::Instrument;

use super::invokers::{Invokers, Invoking};
use crate::audit::AdminAudit;
use crate::tasks::{validate, InvokeError, Invoker, TaskError, TaskStore};
use spear_identity::Access;

/// `spear.v1.Tasks`: the task table and SMS-routed invocation.
pub struct TasksService {
    store: Arc<dyn TaskStore>,
    invoker: Arc<Invoker>,
    access: Access,
    audit: AdminAudit,
    invokers: Invokers,
}

impl TasksService {
    pub fn new(store: Arc<dyn TaskStore>, invoker: Arc<Invoker>, access: Access) -> Self {
        Self {
            store,
            invoker,
            invokers: Invokers {
                access: access.clone(),
                oidc: None,
            },
            access,
            audit: AdminAudit::default(),
        }
    }

    /// People and workloads of `oidc` may invoke the tasks that list them.
    pub fn with_oidc(mut self, oidc: Option<Arc<spear_identity::OidcVerifier>>) -> Self {
        self.invokers.oidc = oidc;
        self
    }

    /// Records this service's admin writes in the audit trail.
    pub fn audited(mut self, audit: AdminAudit) -> Self {
        self.audit = audit;
        self
    }

    /// The registered task `id`, as a status when it cannot be read.
    async fn stored(&self, id: &str) -> Result<TaskSpec, Status> {
        self.store.get(id).await.map_err(task_status)
    }
}

fn task_status(error: TaskError) -> Status {
    match &error {
        TaskError::Invalid(_) => Status::invalid_argument(error.to_string()),
        TaskError::NotFound(_) => Status::not_found(error.to_string()),
        TaskError::TooMany(_) => Status::resource_exhausted(error.to_string()),
        TaskError::Unavailable(_) | TaskError::Corrupt { .. } => {
            Status::unavailable(error.to_string())
        }
    }
}

fn invoke_status(error: InvokeError) -> Status {
    match error {
        InvokeError::Refused(status) => status,
        other => Status::unavailable(other.to_string()),
    }
}

#[tonic::async_trait]
impl TasksApi for TasksService {
    async fn register_task(
        &self,
        request: Request<RegisterTaskRequest>,
    ) -> Result<Response<RegisterTaskResponse>, Status> {
        let caller = self.access.admin(&request, "register_task")?;
        let task = request
            .into_inner()
            .task
            .ok_or_else(|| Status::invalid_argument("the request has no task"))?;
        let id = task.id.clone();
        let result = match validate(&task) {
            Ok(()) => self.store.put(task).await,
            Err(invalid) => Err(invalid),
        }
        .map_err(task_status);
        self.audit
            .record(&caller, "register_task", &id, &result)
            .await;
        result?;
        info!(task_id = %id, %caller, "task registered");
        Ok(Response::new(RegisterTaskResponse {}))
    }

    async fn get_task(
        &self,
        request: Request<GetTaskRequest>,
    ) -> Result<Response<TaskSpec>, Status> {
        self.access.reader(&request, "get_task")?;
        let id = request.into_inner().id;
        let task = self.store.get(&id).await.map_err(task_status)?;
        Ok(Response::new(task))
    }

    async fn list_tasks(
        &self,
        request: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        self.access.reader(&request, "list_tasks")?;
        let tasks = self.store.list().await.map_err(task_status)?;
        Ok(Response::new(ListTasksResponse { tasks }))
    }

    async fn delete_task(
        &self,
        request: Request<DeleteTaskRequest>,
    ) -> Result<Response<DeleteTaskResponse>, Status> {
        let caller = self.access.admin(&request, "delete_task")?;
        let id = request.into_inner().id;
        let result = self.store.delete(&id).await.map_err(task_status);
        self.audit
            .record(&caller, "delete_task", &id, &result)
            .await;
        result?;
        info!(task_id = %id, %caller, "task deleted");
        Ok(Response::new(DeleteTaskResponse {}))
    }

    async fn explain_task(
        &self,
        request: Request<ExplainRequest>,
    ) -> Result<Response<ExplainResponse>, Status> {
        self.access.admin(&request, "explain_task")?;
        let request = request.into_inner();
        let task = self.stored(&request.task_id).await?;
        let response = self
            .invoker
            .explain(request, task)
            .await
            .map_err(invoke_status)?;
        Ok(Response::new(response))
    }

    async fn invoke_task(
        &self,
        request: Request<InvokeRequest>,
    ) -> Result<Response<InvokeResponse>, Status> {
        let Invoking {
            caller,
            principal,
            token,
        } = self.invokers.principal(&request, "invoke_task").await?;
        // The invocation's trace starts here, or joins the caller's.
        let span = tracing::info_span!(
            "invoke_task",
            otel.name = "spear.v1.Tasks/InvokeTask",
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = "spear.v1.Tasks",
            rpc.method = "InvokeTask",
            task_id = tracing::field::Empty,
            enduser.id = %principal.label(),
        );
        let traceparent = request
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        spear_common::telemetry::set_parent(&span, traceparent.as_deref());
        let mut request = request.into_inner();
        span.record("task_id", request.task_id.as_str());
        spear_proto::check_input_len(request.input.len())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        async {
            let task = self.stored(&request.task_id).await?;
            if let Err(refused) = Invokers::admit(&principal, &task) {
                tracing::warn!(%caller, "{refused}");
                return Err(refused.into());
            }
            // Whatever the caller put there, the run is for who SMS verified.
            request.principal = Some(principal);
            request.delegation = Default::default();
            let response = self
                .invoker
                .invoke(request, task, token.as_deref())
                .await
                .map_err(invoke_status)?;
            Ok(Response::new(response))
        }
        .instrument(span)
        .await
    }
}
