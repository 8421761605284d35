//! A task's WASI grants checked against the node policy: every `${NAME}`
//! in `wasi.env` must be a variable the policy lets tasks read, and every
//! directory must lie under one the policy allows (writable only where it
//! says so). Directories are handed to the runtime open: the ones checked
//! here, whatever happens to their paths before the run starts.

use spear_proto::task::WasiGrants;

use super::InvokeError;
use crate::env_refs::Resolver;
use crate::node_policy::NodePolicy;
use crate::wasm::Granted;

/// The grants with references resolved and directories checked and open.
pub fn resolve(
    task_id: &str,
    wasi: &WasiGrants,
    policy: &NodePolicy,
) -> Result<Granted, InvokeError> {
    let mut env = wasi.env.clone();
    let mut resolver = Resolver::default();
    let lookup = |name: &str| policy.env.lookup(name);
    for (key, value) in env.iter_mut() {
        *value = resolver.resolve(&format!("env.{key}"), value, &lookup)?;
    }
    let dirs = wasi
        .dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let key = format!("wasi.dirs[{i}]");
            policy
                .dirs
                .grant(&key, &dir.host, &dir.guest, dir.writable)
                .map_err(|why| InvokeError::Refused {
                    task_id: task_id.to_string(),
                    why: why.into(),
                })
        })
        .collect::<Result<_, InvokeError>>()?;
    Ok(Granted {
        args: wasi.args.clone(),
        env,
        dirs,
    })
}
