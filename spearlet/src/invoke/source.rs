//! Where a run's task comes from: sent along with the invocation by SMS,
//! or asked of SMS (the one the node follows first, then each configured
//! one) when an admin invokes the node directly by task id.

use std::time::Duration;

use spear_proto::v1::{GetTaskRequest, InvokeRequest, TaskSpec};

use super::InvokeError;
use crate::sms_link::SmsLink;

/// How long SMS has to answer for a task's spec.
const FETCH_TASK_WITHIN: Duration = Duration::from_secs(10);

/// Finds the task of an invocation.
pub struct TaskSource {
    sms: SmsLink,
}

impl TaskSource {
    pub fn new(sms: SmsLink) -> TaskSource {
        TaskSource { sms }
    }

    /// The task `request` runs: the one it carries (which must be the one
    /// it names), else SMS's.
    pub async fn task_of(&self, request: &mut InvokeRequest) -> Result<TaskSpec, InvokeError> {
        match request.task.take() {
            Some(task) if task.id != request.task_id => Err(InvokeError::InvalidRequest(format!(
                "the request names task '{}' but carries task '{}'",
                request.task_id, task.id
            ))),
            Some(task) => Ok(task),
            None => self.fetch(&request.task_id).await,
        }
    }

    async fn fetch(&self, task_id: &str) -> Result<TaskSpec, InvokeError> {
        let mut why = String::from("no SMS address");
        for addr in self.sms.candidates() {
            let mut tasks = match self.sms.tasks(&addr).await {
                Ok(tasks) => tasks,
                Err(e) => {
                    why = e.to_string();
                    continue;
                }
            };
            let request = GetTaskRequest {
                id: task_id.to_string(),
            };
            match tokio::time::timeout(FETCH_TASK_WITHIN, tasks.get_task(request)).await {
                Ok(Ok(task)) => return Ok(task.into_inner()),
                Ok(Err(status)) if status.code() == tonic::Code::NotFound => {
                    return Err(InvokeError::TaskNotFound(task_id.to_string()))
                }
                Ok(Err(status)) => why = format!("{addr}: {}", status.message()),
                Err(_) => why = format!("{addr} did not answer within {FETCH_TASK_WITHIN:?}"),
            }
        }
        Err(InvokeError::TaskUnavailable {
            task_id: task_id.to_string(),
            why,
        })
    }
}
