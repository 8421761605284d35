//! A task's WASI grants checked against the node policy: every `${NAME}`
//! in `wasi.env` must be a variable the policy lets tasks read, and every
//! directory must lie under one the policy allows (writable only where it
//! says so). Directories are handed to the runtime resolved.

use spear_proto::task::{DirGrant, WasiGrants};

use super::InvokeError;
use crate::env_refs::Resolver;
use crate::node_policy::NodePolicy;

/// The grants with references resolved and directories checked.
pub fn resolve(
    task_id: &str,
    wasi: &WasiGrants,
    policy: &NodePolicy,
) -> Result<WasiGrants, InvokeError> {
    let mut resolved = wasi.clone();
    let mut resolver = Resolver::default();
    let lookup = |name: &str| policy.env.lookup(name);
    for (key, value) in resolved.env.iter_mut() {
        *value = resolver.resolve(&format!("env.{key}"), value, &lookup)?;
    }
    resolved.dirs = wasi
        .dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let key = format!("wasi.dirs[{i}]");
            let granted = policy
                .dirs
                .grant(&key, &dir.host, &dir.guest, dir.writable)
                .map_err(|why| InvokeError::Refused {
                    task_id: task_id.to_string(),
                    why: why.into(),
                })?;
            Ok(DirGrant {
                host: granted.host.display().to_string(),
                guest: granted.guest,
                writable: granted.writable,
            })
        })
        .collect::<Result<_, InvokeError>>()?;
    Ok(resolved)
}
