//! Loading a guest: compiled (or taken from the caches) and linked, a
//! core module against the module linker, a component against the
//! component linker. Compiled forms are kept in memory (linked) and on
//! disk (signed artifacts, `cache.rs`) by the binary's sha256.

use std::time::Instant;

use sha2::{Digest, Sha256};
use tracing::{info, warn};
use wasmtime::component::Component;
use wasmtime::Module;

use super::component::{is_component, Loaded};
use super::runtime::{hex, GuestRuntime, LoadError};

impl<H: Send + 'static> GuestRuntime<H> {
    /// The linked guest with this sha256, when this runtime has loaded it.
    pub fn cached(&self, digest: &[u8; 32]) -> Option<Loaded<H>> {
        self.modules.lock().get(digest)
    }

    /// Compiles (or takes from the caches) and links `wasm`, a core
    /// module (binary or text) or a component.
    pub fn load(&self, wasm: &[u8]) -> Result<Loaded<H>, LoadError> {
        let digest: [u8; 32] = Sha256::digest(wasm).into();
        if let Some(pre) = self.modules.lock().get(&digest) {
            return Ok(pre);
        }
        let loaded = if is_component(wasm) {
            let (linker, _) = self.components.as_ref().ok_or(LoadError::NoComponents)?;
            let component = self.compile_component(wasm, &digest)?;
            Loaded::Component(
                linker
                    .instantiate_pre(&component)
                    .map_err(|e| LoadError::Link(format!("{e:#}")))?,
            )
        } else {
            let module = self.compile(wasm, &digest)?;
            Loaded::Module(
                self.linker
                    .instantiate_pre(&module)
                    .map_err(|e| LoadError::Link(format!("{e:#}")))?,
            )
        };
        self.modules.lock().insert(digest, loaded.clone());
        Ok(loaded)
    }

    /// `bytes` of `digest` from the artifact cache, when this node wrote
    /// them and `deserialize` takes them.
    fn from_artifact<T>(
        &self,
        digest: &[u8; 32],
        deserialize: impl FnOnce(&[u8]) -> wasmtime::Result<T>,
    ) -> Option<T> {
        let artifact = self.artifacts.as_ref()?.read(digest)?;
        match deserialize(&artifact) {
            Ok(compiled) => Some(compiled),
            Err(error) => {
                warn!(%error, "stale compiled module; compiling again");
                None
            }
        }
    }

    /// Keeps `serialized` (the compiled form of `digest`) for next time.
    fn keep_artifact(&self, digest: &[u8; 32], serialized: wasmtime::Result<Vec<u8>>) {
        if let (Some(artifacts), Ok(bytes)) = (&self.artifacts, serialized) {
            if let Err(error) = artifacts.write(digest, &bytes) {
                warn!(%error, "cannot write the compiled module cache");
            }
        }
    }

    fn compile(&self, wasm: &[u8], digest: &[u8; 32]) -> Result<Module, LoadError> {
        // SAFETY: the artifact carries this node's MAC over the module's
        // digest and the artifact (see `cache`), so it is what this node
        // serialized; wasmtime checks it matches this engine's config.
        #[allow(unsafe_code)]
        let cached = self.from_artifact(digest, |bytes| unsafe {
            Module::deserialize(&self.engine, bytes)
        });
        if let Some(module) = cached {
            return Ok(module);
        }
        let started = Instant::now();
        // The text format too (tests and hand-written guests).
        let wasm = wat::parse_bytes(wasm).map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        super::resources::check(&wasm)?;
        let module =
            Module::new(&self.engine, &wasm).map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        info!(digest = %hex(digest), took = ?started.elapsed(), "guest module compiled");
        self.keep_artifact(digest, module.serialize());
        Ok(module)
    }

    fn compile_component(&self, wasm: &[u8], digest: &[u8; 32]) -> Result<Component, LoadError> {
        // SAFETY: as for a module's artifact, above.
        #[allow(unsafe_code)]
        let cached = self.from_artifact(digest, |bytes| unsafe {
            Component::deserialize(&self.engine, bytes)
        });
        if let Some(component) = cached {
            return Ok(component);
        }
        let started = Instant::now();
        let component =
            Component::new(&self.engine, wasm).map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        info!(digest = %hex(digest), took = ?started.elapsed(), "guest component compiled");
        self.keep_artifact(digest, component.serialize());
        Ok(component)
    }
}
