//! How a task's module becomes a linked, runnable one: from the runtime's
//! cache, else fetched (and checked against its sha256) by the module
//! store and compiled off the async threads, at most one compile per core
//! and each within the node's compile timeout. Concurrent first runs of a
//! module fetch and compile it once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use spear_proto::v1::TaskSpec;
use tokio::sync::Semaphore;

use super::modules::{self, ModuleStore};
use super::{ChatRuntime, InvokeError, Linked};
use crate::node_policy::ModuleSource;
use crate::wasm::LoadError;

pub struct ModuleLoader {
    runtime: Arc<ChatRuntime>,
    modules: ModuleStore,
    /// Compiles at once, held by the compiling thread itself so a compile
    /// that outlived its timeout still counts until it ends.
    compiles: Arc<Semaphore>,
    compile_timeout: Duration,
    /// One lock per module being loaded.
    loading: Mutex<HashMap<[u8; 32], Arc<tokio::sync::Mutex<()>>>>,
}

impl ModuleLoader {
    pub fn new(
        runtime: Arc<ChatRuntime>,
        modules: ModuleStore,
        compile_timeout: Duration,
    ) -> ModuleLoader {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        ModuleLoader {
            runtime,
            modules,
            compiles: Arc::new(Semaphore::new(cores)),
            compile_timeout,
            loading: Mutex::default(),
        }
    }

    pub fn runtime(&self) -> &ChatRuntime {
        &self.runtime
    }

    /// The linked module of `task`, fetched from `source` if need be.
    pub async fn load(
        &self,
        task: &TaskSpec,
        source: &ModuleSource,
    ) -> Result<Linked, InvokeError> {
        let digest = modules::digest_bytes(&task.module_sha256)
            .ok_or_else(|| spear_proto::task::TaskError::ModuleSha.in_task(&task.id))?;
        if let Some(pre) = self.runtime.cached(&digest) {
            return Ok(pre);
        }
        let lock = Arc::clone(self.loading.lock().entry(digest).or_default());
        let _loading = lock.lock().await;
        // Whoever held the lock before may have loaded it.
        if let Some(pre) = self.runtime.cached(&digest) {
            return Ok(pre);
        }
        let result = self.fetch_and_compile(task, source).await;
        self.loading.lock().remove(&digest);
        result
    }

    async fn fetch_and_compile(
        &self,
        task: &TaskSpec,
        source: &ModuleSource,
    ) -> Result<Linked, InvokeError> {
        let bytes = self
            .modules
            .get(&task.module_uri, source, &task.module_sha256)
            .await?;
        let runtime = Arc::clone(&self.runtime);
        let compiles = Arc::clone(&self.compiles);
        let compile = async move {
            let permit = compiles.acquire_owned().await;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                runtime.load(&bytes)
            })
            .await
        };
        let timeout = self.compile_timeout;
        let pre = tokio::time::timeout(timeout, compile)
            .await
            .map_err(|_| InvokeError::CompileTimeout(timeout))?
            .map_err(|e| LoadError::Compile(format!("the compiler task failed: {e}")))??;
        Ok(pre)
    }
}
