//! Tasks in etcd under `<prefix>/tasks/<id>` (a protobuf `TaskSpec`), shared
//! by every SMS replica of the installation.

use async_trait::async_trait;
use etcd_client::{Client, GetOptions};
use prost::Message;
use spear_proto::v1::TaskSpec;

use super::{TaskError, TaskStore, MAX_TASKS};

pub struct EtcdTaskStore {
    client: Client,
    prefix: String,
}

impl EtcdTaskStore {
    /// Shares the registry store's connection.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            prefix: format!("{}/tasks/", prefix.trim_end_matches('/')),
        }
    }

    fn key(&self, id: &str) -> String {
        format!("{}{id}", self.prefix)
    }

    fn decode(key: &[u8], value: &[u8]) -> Result<TaskSpec, TaskError> {
        TaskSpec::decode(value).map_err(|e| TaskError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason: e.to_string(),
        })
    }
}

fn unavailable(error: etcd_client::Error) -> TaskError {
    TaskError::Unavailable(format!("etcd: {error}"))
}

#[async_trait]
impl TaskStore for EtcdTaskStore {
    async fn put(&self, spec: TaskSpec) -> Result<(), TaskError> {
        let mut client = self.client.clone();
        let key = self.key(&spec.id);
        let exists = client
            .get(key.clone(), Some(GetOptions::new().with_count_only()))
            .await
            .map_err(unavailable)?
            .count()
            > 0;
        if !exists {
            let count = client
                .get(
                    self.prefix.clone(),
                    Some(GetOptions::new().with_prefix().with_count_only()),
                )
                .await
                .map_err(unavailable)?
                .count();
            if count as usize >= MAX_TASKS {
                return Err(TaskError::TooMany(MAX_TASKS));
            }
        }
        client
            .put(key, spec.encode_to_vec(), None)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<TaskSpec, TaskError> {
        let mut client = self.client.clone();
        let response = client.get(self.key(id), None).await.map_err(unavailable)?;
        match response.kvs().first() {
            Some(kv) => Self::decode(kv.key(), kv.value()),
            None => Err(TaskError::NotFound(id.to_string())),
        }
    }

    async fn list(&self) -> Result<Vec<TaskSpec>, TaskError> {
        let mut client = self.client.clone();
        let response = client
            .get(self.prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(unavailable)?;
        response
            .kvs()
            .iter()
            .map(|kv| Self::decode(kv.key(), kv.value()))
            .collect()
    }

    async fn delete(&self, id: &str) -> Result<(), TaskError> {
        let mut client = self.client.clone();
        let response = client
            .delete(self.key(id), None)
            .await
            .map_err(unavailable)?;
        if response.deleted() == 0 {
            return Err(TaskError::NotFound(id.to_string()));
        }
        Ok(())
    }
}
