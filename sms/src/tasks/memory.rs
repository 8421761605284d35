//! Tasks in this process; gone when SMS restarts (use etcd to keep them).

use std::collections::BTreeMap;

use async_trait::async_trait;
use parking_lot::RwLock;
use spear_proto::v1::TaskSpec;

use super::{TaskError, TaskStore, MAX_TASKS};

#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    tasks: RwLock<BTreeMap<String, TaskSpec>>,
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn put(&self, spec: TaskSpec) -> Result<(), TaskError> {
        let mut tasks = self.tasks.write();
        if tasks.len() >= MAX_TASKS && !tasks.contains_key(&spec.id) {
            return Err(TaskError::TooMany(MAX_TASKS));
        }
        tasks.insert(spec.id.clone(), spec);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<TaskSpec, TaskError> {
        self.tasks
            .read()
            .get(id)
            .cloned()
            .ok_or_else(|| TaskError::NotFound(id.to_string()))
    }

    async fn list(&self) -> Result<Vec<TaskSpec>, TaskError> {
        Ok(self.tasks.read().values().cloned().collect())
    }

    async fn delete(&self, id: &str) -> Result<(), TaskError> {
        self.tasks
            .write()
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| TaskError::NotFound(id.to_string()))
    }
}
